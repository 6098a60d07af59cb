// gzip traces: every format read through gzip gives the events of the plain
// file; multi-member files; damaged files (truncated anywhere, bad CRC, bad
// header, data after the end) and decompression bombs fail on one line that
// names the byte; writers' output gzip-compressed when the name says ".gz".
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpumem/common/error.h"
#include "gpumem/common/gzip.h"
#include "gpumem/plan/csv.h"
#include "gpumem/trace/history_format.h"
#include "gpumem/trace/lifetimes.h"
#include "gpumem/trace/perfetto_writer.h"
#include "gpumem/trace/pytorch_snapshot.h"
#include "test_errors.h"
#include "test_paths.h"

namespace gpumem::trace {
namespace {

constexpr std::uint64_t kNoLimit = std::uint64_t{1} << 40;

std::string trace_path(const std::string& name) { return (test::source_dir() / "tests/data/traces" / name).string(); }

std::string temp_path(const std::string& name) { return testing::TempDir() + "gpumem_gzip_" + name; }

std::string write_temp(const std::string& name, const std::string& bytes) {
  const std::string path = temp_path(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

using test::error_of;

std::string decompress_error(const std::string& bytes, std::uint64_t max_bytes = kNoLimit) {
  return error_of([&] { gzip::decompress(bytes, "t.gz", max_bytes); });
}

// The same trace, read once plain and once through gzip.
void expect_same_trace(const Trace& plain, const Trace& gzipped) {
  EXPECT_EQ(gzipped.format, plain.format);
  EXPECT_TRUE(gzipped.events == plain.events);
  EXPECT_TRUE(gzipped.contexts == plain.contexts);
  EXPECT_EQ(gzipped.segments.size(), plain.segments.size());
  EXPECT_EQ(gzipped.skipped_records, plain.skipped_records);
  EXPECT_EQ(gzipped.warnings.size(), plain.warnings.size());
}

// --- the gzip layer --------------------------------------------------------------

// Text that compresses like a trace does, and is larger than zlib's window
// and gzip.cpp's output chunk.
std::string sample_text() {
  std::string s;
  for (int i = 0; i < 40000; ++i) s += "{\"action\": \"alloc\", \"addr\": " + std::to_string(i * 7919) + "}\n";
  return s;
}

TEST(Gzip, CompressThenDecompressGivesTheBytesBack) {
  for (const std::string& data : {std::string(), std::string("x"), std::string(1 << 20, '\0'), sample_text()}) {
    const std::string z = gzip::compress(data);
    EXPECT_TRUE(gzip::has_magic(z));
    EXPECT_EQ(gzip::decompress(z, "t.gz", kNoLimit), data);
    EXPECT_EQ(gzip::compress(data), z) << "the same input gives the same file";
  }
  EXPECT_FALSE(gzip::has_magic("\x1f"));
  EXPECT_FALSE(gzip::has_magic("{\"traceEvents\": []}"));
}

TEST(Gzip, EveryMemberOfAMultiMemberFileIsRead) {
  const std::string a = sample_text(), b = "second member\n";
  const std::string z = gzip::compress(a) + gzip::compress("") + gzip::compress(b);
  EXPECT_EQ(gzip::decompress(z, "t.gz", kNoLimit), a + b);
  // Fed a byte at a time, as a slow pipe would: members, headers and
  // trailers cut at every place.
  gzip::Inflater inflater("t.gz", kNoLimit, "over");
  std::string out;
  for (char c : z) inflater.feed(std::string_view(&c, 1), out);
  inflater.finish();
  EXPECT_EQ(out, a + b);
}

TEST(Gzip, TruncatedAnywhereIsOneLineNamingTheEnd) {
  const std::string first = gzip::compress("Thread,Time,Action,Pointer,Size,Stream\n1,1.5,allocate,0x10,64,0x0\n");
  const std::string z = first + gzip::compress(sample_text().substr(0, 3000));
  for (std::size_t cut = 1; cut < z.size(); ++cut) {
    if (cut == first.size()) {
      EXPECT_NO_THROW(gzip::decompress(z.substr(0, cut), "t.gz", kNoLimit)) << "a whole first member";
      continue;
    }
    const std::string message = decompress_error(z.substr(0, cut));
    const std::string member = cut < first.size() ? "1" : "2";
    EXPECT_EQ(message, "t.gz: byte " + std::to_string(cut) + ": the file ends inside gzip member " + member +
                           " (it is truncated)")
        << cut;
  }
}

TEST(Gzip, BadChecksumsNameTheTrailer) {
  const std::string data = sample_text();
  const std::string z = gzip::compress(data);
  const std::size_t trailer = z.size() - 8;
  std::string bad_crc = z;
  bad_crc[trailer] = static_cast<char>(bad_crc[trailer] ^ 1);
  EXPECT_EQ(decompress_error(bad_crc),
            "t.gz: byte " + std::to_string(trailer) +
                ": gzip member 1: the CRC-32 in its trailer does not match its data (the file is corrupt)");
  std::string bad_length = z;
  bad_length[trailer + 4] = static_cast<char>(bad_length[trailer + 4] ^ 1);
  EXPECT_EQ(decompress_error(bad_length),
            "t.gz: byte " + std::to_string(trailer + 4) +
                ": gzip member 1: the length in its trailer does not match its data (the file is corrupt)");
  // In a second member, the place counts from the start of the file.
  const std::string two = gzip::compress("first\n") + bad_crc;
  EXPECT_NE(decompress_error(two).find("byte " + std::to_string(two.size() - 8) + ": gzip member 2: the CRC-32"),
            std::string::npos);
}

TEST(Gzip, BadHeadersNameTheirByte) {
  const std::string z = gzip::compress("payload\n");
  std::string method = z;
  method[2] = 7;
  EXPECT_EQ(decompress_error(method),
            "t.gz: byte 2: gzip header: unknown compression method (8, deflate, is the only one)");
  std::string flags = z;
  flags[3] = static_cast<char>(0xe0);
  EXPECT_EQ(decompress_error(flags), "t.gz: byte 3: gzip header: reserved flag bits are set");
  EXPECT_EQ(decompress_error("PK\x03\x04 a zip file"),
            "t.gz: byte 0: not gzip data (it does not start with the bytes 1f 8b)");
  EXPECT_EQ(decompress_error(""), "t.gz: byte 0: empty: no gzip member");
}

TEST(Gzip, DataAfterTheStreamIsAnError) {
  const std::string z = gzip::compress("payload\n");
  const std::string at = "t.gz: byte " + std::to_string(z.size()) +
                         ": data after the end of the gzip stream that is not another gzip member";
  EXPECT_EQ(decompress_error(z + "trailing junk"), at);
  EXPECT_EQ(decompress_error(z + "j"), at);
  EXPECT_EQ(decompress_error(z + std::string(512, '\0')), at);
  // A lone 1f could be the start of a member: the file is cut short.
  EXPECT_NE(decompress_error(z + "\x1f").find("ends inside gzip member 2"), std::string::npos);
}

TEST(Gzip, AnyByteFlippedIsReadOrOneLineError) {
  const std::string z = gzip::compress(sample_text().substr(0, 4000));
  for (std::size_t i = 0; i < z.size(); ++i) {
    for (unsigned char mask : {0x01, 0x80, 0xff}) {
      std::string damaged = z;
      damaged[i] = static_cast<char>(damaged[i] ^ mask);
      try {
        gzip::decompress(damaged, "t.gz", kNoLimit);  // header bytes such as the time change nothing
      } catch (const InputError& e) {
        const std::string message = e.what();
        EXPECT_EQ(message.rfind("t.gz: byte ", 0), 0u) << message;
        EXPECT_EQ(message.find('\n'), std::string::npos) << message;
      }
    }
  }
}

TEST(Gzip, ABombStopsAtTheLimitWhateverTheFileSays) {
  // 64 MiB of zeros in about 64 KiB; the limit is 1 MiB.
  const std::string bomb = gzip::compress(std::string(64 << 20, '\0'));
  ASSERT_LT(bomb.size(), 100u << 10);
  constexpr std::uint64_t kLimit = 1 << 20;
  gzip::Inflater inflater("bomb.gz", kLimit, "too much");
  std::string out;
  const std::string message = error_of([&] { inflater.feed(bomb, out); });
  EXPECT_EQ(message.rfind("bomb.gz: byte ", 0), 0u) << message;
  EXPECT_TRUE(message.ends_with(": too much")) << message;
  EXPECT_LE(out.size(), kLimit) << "nothing past the limit is kept";
  // The trailer's length is never trusted: a file claiming 8 bytes still stops.
  std::string lying = bomb;
  lying.replace(lying.size() - 4, 4, std::string("\x08\x00\x00\x00", 4));
  EXPECT_NE(decompress_error(lying, kLimit).find("decompresses to more than 1048576 bytes"), std::string::npos);
  // Exactly at the limit is fine; one byte more is not.
  EXPECT_EQ(gzip::decompress(gzip::compress(std::string(kLimit, 'a')), "t.gz", kLimit).size(), kLimit);
  EXPECT_NE(decompress_error(gzip::compress(std::string(kLimit + 1, 'a')), kLimit).find("more than"),
            std::string::npos);
}

// --- traces through gzip -----------------------------------------------------------

TEST(GzipTrace, ARealRecordedTraceGzippedHereReadsTheSame) {
  const Trace plain = read_trace(trace_path("resnet18_train.json"));
  const std::string gz =
      write_temp("resnet18_train.json.gz", gzip::compress(test::read_file_bytes(trace_path("resnet18_train.json"))));
  const Trace gzipped = read_trace(gz);
  ASSERT_EQ(gzipped.events.size(), 2412u);
  expect_same_trace(plain, gzipped);
  EXPECT_EQ(gzipped.source, gz);
}

TEST(GzipTrace, PythonsGzipInTwoMembersReadsTheSame) {
  // Made by tools/make_gzip_fixtures.py: two members with file names in
  // their headers, as Python's gzip writes them.
  const Trace plain = read_trace(trace_path("leaky_mlp_train.json"));
  const Trace gzipped = read_trace(trace_path("leaky_mlp_train.json.gz"));
  EXPECT_FALSE(plain.events.empty());
  expect_same_trace(plain, gzipped);
}

TEST(GzipTrace, EveryFormatRoundTripsThroughGz) {
  const Trace chrome = read_trace(trace_path("transformer_train.json"));
  std::ostringstream pickle, history, perfetto;
  write_pytorch_snapshot(read_trace(trace_path("snapshot_p4.pickle")), pickle);
  write_history(chrome, history);
  write_perfetto(chrome, perfetto);
  const std::string csv =
      plan::write_csv(to_problem(extract_lifetimes(chrome, busiest_device(chrome), false), chrome.events.size()), {});
  const std::vector<std::pair<std::string, std::string>> outputs = {
      {"snapshot.pickle", pickle.str()},
      {"history.jsonl", history.str()},
      {"perfetto.json", perfetto.str()},
      {"lifetimes.csv", csv},
      {"rmm.csv", test::read_file_bytes(trace_path("rmm_sample.csv"))},
      {"chrome.json", test::read_file_bytes(trace_path("transformer_train.json"))},
  };
  std::vector<std::string> formats;
  for (const auto& [name, contents] : outputs) {
    SCOPED_TRACE(name);
    const std::string plain_path = temp_path(name), gz_path = temp_path(name + ".gz");
    write_trace_file(plain_path, contents);
    write_trace_file(gz_path, contents);
    const std::string gz_bytes = test::read_file_bytes(gz_path);
    EXPECT_TRUE(gzip::has_magic(gz_bytes));
    EXPECT_FALSE(gzip::has_magic(test::read_file_bytes(plain_path)));
    EXPECT_EQ(gzip::decompress(gz_bytes, gz_path, kNoLimit), contents);
    const Trace plain = read_trace(plain_path);
    expect_same_trace(plain, read_trace(gz_path));
    formats.push_back(plain.format);
  }
  std::sort(formats.begin(), formats.end());
  formats.erase(std::unique(formats.begin(), formats.end()), formats.end());
  EXPECT_EQ(formats, (std::vector<std::string>{"chrome-trace", "gpumem-history", "minimalloc-csv", "pytorch-snapshot",
                                               "rmm-log"}));
}

TEST(GzipTrace, TheMagicBytesDecideNotTheName) {
  const std::string rmm = test::read_file_bytes(trace_path("rmm_sample.csv"));
  const Trace expected = read_trace(trace_path("rmm_sample.csv"));
  expect_same_trace(expected, read_trace(write_temp("gzip_named_plain.csv", gzip::compress(rmm))));
  expect_same_trace(expected, read_trace(write_temp("plain_named_gzip.csv.gz", rmm)));
}

TEST(GzipTrace, DamagedGzipIsAnErrorEvenWithoutStrict) {
  const std::string z = gzip::compress(test::read_file_bytes(trace_path("rmm_sample.csv")));
  const std::string truncated = write_temp("truncated.csv.gz", z.substr(0, z.size() - 3));
  EXPECT_EQ(error_of([&] { read_trace(truncated); }), truncated + ": byte " + std::to_string(z.size() - 3) +
                                                          ": the file ends inside gzip member 1 (it is truncated)");
  std::string crc = z;
  crc[z.size() - 8] = static_cast<char>(crc[z.size() - 8] ^ 0x40);
  const std::string bad = write_temp("bad_crc.csv.gz", crc);
  EXPECT_NE(error_of([&] {
              read_trace(bad);
            }).find(bad + ": byte " + std::to_string(z.size() - 8) + ": gzip member 1: the CRC-32"),
            std::string::npos);
}

TEST(GzipTrace, PlacesInTheContentSayTheyAreDecompressed) {
  const std::string gz = write_temp("junk.gz", gzip::compress("this is not a trace\n"));
  EXPECT_EQ(error_of([&] { read_trace(gz); }).rfind(gz + " (decompressed): byte 0: not a trace gpumem reads", 0), 0u);
  const std::string history =
      write_temp("bad_line.jsonl.gz", gzip::compress("{\"format\": \"gpumem-history\", \"version\": 1}\nnot json\n"));
  const std::string message = error_of([&] { read_trace(history, ReadOptions{.strict = true}); });
  EXPECT_EQ(message.rfind(history + " (decompressed): line 2: ", 0), 0u) << message;
}

TEST(GzipTrace, TheLimitHoldsForPlainAndGzipFilesAlike) {
  const std::string rmm = test::read_file_bytes(trace_path("rmm_sample.csv"));
  ReadOptions small;
  small.max_bytes = rmm.size() - 1;
  const std::string plain = trace_path("rmm_sample.csv");
  EXPECT_EQ(error_of([&] { read_trace(plain, small); }),
            plain + ": more than " + std::to_string(small.max_bytes) + " bytes, the most gpumem reads from one trace");
  const std::string gz = write_temp("limit.csv.gz", gzip::compress(rmm));
  const std::string message = error_of([&] { read_trace(gz, small); });
  EXPECT_EQ(message.rfind(gz + ": byte ", 0), 0u) << message;
  EXPECT_TRUE(message.ends_with(": decompresses to more than " + std::to_string(small.max_bytes) +
                                " bytes, the most gpumem reads from one trace"))
      << message;
  small.max_bytes = rmm.size();
  EXPECT_EQ(read_trace(gz, small).events.size(), read_trace(plain).events.size());
}

}  // namespace
}  // namespace gpumem::trace
