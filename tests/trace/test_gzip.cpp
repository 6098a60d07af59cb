// gzip files: multi-member files; damaged files (truncated anywhere, bad
// CRC, bad header, data after the end) and decompression bombs fail on one
// line that names the byte.
#include <cstdint>
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "gpumem/common/error.h"
#include "gpumem/common/gzip.h"

namespace gpumem {
namespace {

constexpr std::uint64_t kNoLimit = std::uint64_t{1} << 40;

// The message of the InputError f throws, checked to be one line.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    return message;
  }
  ADD_FAILURE() << "no InputError";
  return "";
}

std::string decompress_error(const std::string& bytes, std::uint64_t max_bytes = kNoLimit) {
  return error_of([&] { gzip::decompress(bytes, "t.gz", max_bytes); });
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
  EXPECT_EQ(decompress_error(method), "t.gz: byte 2: gzip header: unknown compression method (8, deflate, is the only one)");
  std::string flags = z;
  flags[3] = static_cast<char>(0xe0);
  EXPECT_EQ(decompress_error(flags), "t.gz: byte 3: gzip header: reserved flag bits are set");
  EXPECT_EQ(decompress_error("PK\x03\x04 a zip file"), "t.gz: byte 0: not gzip data (it does not start with the bytes 1f 8b)");
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
  EXPECT_NE(decompress_error(gzip::compress(std::string(kLimit + 1, 'a')), kLimit).find("more than"), std::string::npos);
}

}  // namespace
}  // namespace gpumem
