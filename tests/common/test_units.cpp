#include <gtest/gtest.h>

#include "gpumem/common/units.h"

namespace gpumem {
namespace {

TEST(FormatBytes, UsesBinaryUnits) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1024), "1.00 KiB");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(5111808), "4.88 MiB");  // BERT-base's peak, 4.875 MiB
  EXPECT_EQ(format_bytes(uint64_t{1} << 30), "1.00 GiB");
  EXPECT_EQ(format_bytes(uint64_t{3} << 40), "3.00 TiB");
  EXPECT_EQ(format_bytes(~uint64_t{0}), "16.00 EiB");
}

TEST(FormatCount, GroupsThousands) {
  EXPECT_EQ(format_count(0), "0");
  EXPECT_EQ(format_count(999), "999");
  EXPECT_EQ(format_count(1000), "1,000");
  EXPECT_EQ(format_count(25557032), "25,557,032");
}

}  // namespace
}  // namespace gpumem

namespace gpumem {
namespace {

TEST(ParseBytes, ReadsBinaryAndDecimalUnits) {
  EXPECT_EQ(parse_bytes("1048576"), 1048576u);
  EXPECT_EQ(parse_bytes("512MiB"), 512u << 20);
  EXPECT_EQ(parse_bytes("1.5 GiB"), 3u << 29);
  EXPECT_EQ(parse_bytes("80GB"), 80'000'000'000u);
  EXPECT_FALSE(parse_bytes("lots"));
  EXPECT_FALSE(parse_bytes("1.2.3GiB"));
}

// Issue 46: every form users type for 16 GiB means 16 GiB.
TEST(ParseBytes, ReadsTheFormsUsersType) {
  for (const char* sixteen : {"16GiB", "16Gi", "16G", "16gib", "16 Gi", "16g"}) {
    EXPECT_EQ(parse_bytes(sixteen), uint64_t{16} << 30) << sixteen;
  }
  EXPECT_EQ(parse_bytes("2T"), uint64_t{2} << 40);
  EXPECT_EQ(parse_bytes("2Ti"), uint64_t{2} << 40);
  EXPECT_EQ(parse_bytes("512Mi"), uint64_t{512} << 20);
  EXPECT_EQ(parse_bytes("16GB"), 16'000'000'000u);
  EXPECT_FALSE(parse_bytes("16Gb!"));
  EXPECT_FALSE(parse_bytes("16Gii"));
}

TEST(ParseTokens, ReadsContextLengthsAsUsersWriteThem) {
  EXPECT_EQ(parse_tokens("4096"), 4096u);
  EXPECT_EQ(parse_tokens("8k"), 8192u);
  EXPECT_EQ(parse_tokens("8K"), 8192u);
  EXPECT_EQ(parse_tokens("128k"), 131072u);  // Llama 3.1's "128k" context
  EXPECT_EQ(parse_tokens("1.5k"), 1536u);
  EXPECT_EQ(parse_tokens("1M"), 1048576u);
  EXPECT_EQ(parse_tokens(" 32k "), 32768u);
  for (const char* bad : {"", "k", "8kb", "1.3k", "-8k", ".5k", "8..0k", "4294967296", "4194304k", "eight"}) {
    EXPECT_FALSE(parse_tokens(bad)) << bad;
  }
  EXPECT_EQ(parse_tokens("4294967295"), 4294967295u);
}

TEST(ParseBytes, TellsDecimalUnitsApart) {
  for (const char* decimal : {"80GB", "1.5 TB", "512MB", "4KB "}) EXPECT_TRUE(has_decimal_unit(decimal)) << decimal;
  for (const char* binary : {"80GiB", "512MiB", "1048576", "100B", "4K", "16G"}) {
    EXPECT_FALSE(has_decimal_unit(binary)) << binary;
  }
}

}  // namespace
}  // namespace gpumem

namespace gpumem {
namespace {

TEST(ParseDuration, PrometheusStyleDurations) {
  using std::chrono::nanoseconds;
  EXPECT_EQ(parse_duration("1s"), nanoseconds(1'000'000'000));
  EXPECT_EQ(parse_duration("500ms"), nanoseconds(500'000'000));
  EXPECT_EQ(parse_duration("1.5s"), nanoseconds(1'500'000'000));
  EXPECT_EQ(parse_duration("2m"), nanoseconds(120'000'000'000));
  EXPECT_EQ(parse_duration("1h"), nanoseconds(3'600'000'000'000));
  EXPECT_EQ(parse_duration("250us"), nanoseconds(250'000));
  EXPECT_EQ(parse_duration("7ns"), nanoseconds(7));
  EXPECT_EQ(parse_duration("0s"), nanoseconds(0));
  for (const char* bad : {"", "s", "1", "1x", "-1s", "1 s", "s1", "1e400s", "25h", "ms", "+1s", "1.2.3s", "nan s"}) {
    EXPECT_FALSE(parse_duration(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace gpumem

#include <cstdio>
#include <thread>

#include "gpumem/common/progress.h"

namespace gpumem {
namespace {

TEST(Progress, LinesSayHowFarAndHowLong) {
  EXPECT_EQ(Progress::line("replaying", 50, 100, 3.14, 10), "replaying [#####.....]  50%  3.1 s");
  EXPECT_EQ(Progress::line("replaying", 200, 100, 1, 4), "replaying [####] 100%  1.0 s");
  EXPECT_EQ(Progress::line("reading t.json", 7, 0, 2.25), "reading t.json  2.2 s");
}

TEST(Progress, DrawsOnlyWhenAskedAndClearsItsLine) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  set_progress_enabled(true);
  {
    Progress quiet("not a terminal", 10, out);
    EXPECT_FALSE(quiet.drawing());
  }
  set_progress_enabled(false);
  {
    Progress shown("work", 10, out, /*force=*/true);
    ASSERT_TRUE(shown.drawing());
    shown.advance(5);
    std::this_thread::sleep_for(std::chrono::milliseconds(450));
  }
  std::rewind(out);
  std::string text(4096, '\0');
  text.resize(std::fread(text.data(), 1, text.size(), out));
  std::fclose(out);
  EXPECT_NE(text.find("\rwork [###############...............]  50%"), std::string::npos) << text;
  EXPECT_EQ(text.substr(text.size() - 4), "\r\x1b[K") << "the line is cleared at the end";
}

TEST(Progress, QuickWorkNeverDraws) {
  std::FILE* out = std::tmpfile();
  { Progress quick("quick", 10, out, /*force=*/true); }
  EXPECT_EQ(std::ftell(out), 0L);
  std::fclose(out);
}

}  // namespace
}  // namespace gpumem
