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
