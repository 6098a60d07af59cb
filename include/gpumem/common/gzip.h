#pragma once
// gzip files (RFC 1952), read and written through zlib: what lets gpumem
// take `trace.json.gz` as it takes `trace.json`. No zlib type appears here.
//
// Reading never trusts the file: the sizes a gzip trailer states are only
// checked, never used to allocate, and the decompressed bytes are counted
// as they come out of zlib, so a small file that inflates to terabytes stops
// at the caller's limit. Every problem is an InputError on one line: "FILE:
// byte N: PROBLEM", N an offset in the compressed file.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace gpumem::gzip {

// Whether the bytes start with gzip's magic number, 1f 8b.
bool has_magic(std::string_view head);

// Decompresses a gzip file given in pieces, as they are read: every member
// of a multi-member file (`cat a.gz b.gz`), one after the other.
class Inflater {
 public:
  // name: the file, for messages. max_bytes: the most decompressed bytes
  // accepted; one more is an InputError, and `over_limit` (e.g. "more than
  // N bytes, the most gpumem reads from one trace") is its problem.
  Inflater(std::string name, std::uint64_t max_bytes, std::string over_limit);
  ~Inflater();
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;

  // Decompresses the file's next bytes onto the end of `out`.
  void feed(std::string_view compressed, std::string& out);
  // The file ends here: throws unless its last member is complete.
  void finish();

 private:
  [[noreturn]] void fail(std::uint64_t byte, std::string_view problem) const;
  [[noreturn]] void fail_on_zlib_error(std::uint64_t byte, const char* zlib_message) const;

  struct Stream;
  std::unique_ptr<Stream> stream_;
  std::string name_;
  std::uint64_t max_bytes_;
  std::string over_limit_;
  std::uint64_t offset_ = 0;        // compressed bytes consumed so far
  std::uint64_t member_start_ = 0;  // where the current member begins
  std::uint64_t members_ = 0;       // members begun
  unsigned char member_first_byte_ = 0;
  bool between_members_ = true;  // none begun yet, or the last one ended
};

// The whole file's bytes decompressed (Inflater's rules and messages).
std::string decompress(std::string_view compressed, const std::string& name, std::uint64_t max_bytes);

// One gzip member holding `data`, at zlib's default level; no file name and
// a zero time in the header, so equal input gives equal files.
std::string compress(std::string_view data);

}  // namespace gpumem::gzip
