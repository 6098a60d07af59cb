// libFuzzer target: arbitrary bytes through gpumem's gzip reader.
//
// The contract under test: decompress() returns the bytes or throws
// gpumem::InputError with one line "fuzz.gz: byte N: ...", and never more
// than its limit. Beyond that: the same bytes fed to an Inflater in two
// pieces, split where the input's first byte says, give the same bytes or
// the same message (a member, a header or a trailer cut anywhere between
// reads changes nothing), except for the place where the limit is found;
// what decompresses compresses and decompresses back to itself. Anything
// else aborts, as does any sanitizer report.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gpumem/common/error.h"
#include "gpumem/common/gzip.h"

#include "fuzz_check.h"

using gpumem::fuzz::check;

namespace {

// Small, so that a bomb costs the fuzzer little time.
constexpr std::uint64_t kMaxBytes = std::uint64_t{1} << 20;
// What decompress() says past it.
constexpr std::string_view kOverLimit = "decompresses to more than 1048576 bytes, the limit";

struct Outcome {
  bool ok = false;
  std::string bytes;  // the output, or the message
};

Outcome whole(std::string_view data) {
  Outcome o;
  try {
    o.bytes = gpumem::gzip::decompress(data, "fuzz.gz", kMaxBytes);
    o.ok = true;
  } catch (const gpumem::InputError& e) {
    o.bytes = e.what();
  }
  return o;
}

Outcome in_two_pieces(std::string_view data, std::size_t split) {
  Outcome o;
  try {
    gpumem::gzip::Inflater inflater("fuzz.gz", kMaxBytes, std::string(kOverLimit));
    inflater.feed(data.substr(0, split), o.bytes);
    inflater.feed(data.substr(split), o.bytes);
    inflater.finish();
    o.ok = true;
  } catch (const gpumem::InputError& e) {
    o.bytes = e.what();
  }
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  const std::string_view data(reinterpret_cast<const char*>(bytes), size);
  const Outcome a = whole(data);
  if (a.ok) {
    check(a.bytes.size() <= kMaxBytes);
    check(gpumem::gzip::decompress(gpumem::gzip::compress(a.bytes), "again.gz", kMaxBytes) == a.bytes);
  } else {
    check(a.bytes.rfind("fuzz.gz: byte ", 0) == 0 && a.bytes.find('\n') == std::string::npos);
  }
  const std::size_t split = size == 0 ? 0 : size * bytes[0] / 256;
  const Outcome b = in_two_pieces(data, split);
  check(a.ok == b.ok);
  // Where the limit is found depends on the reads; which error it is does not.
  if (!a.ok && a.bytes.ends_with(kOverLimit))
    check(b.bytes.ends_with(kOverLimit));
  else
    check(a.bytes == b.bytes);
  return 0;
}

// Sanitizer reports with a stack, and every UB report is fatal.
extern "C" const char* __ubsan_default_options() { return "print_stacktrace=1:halt_on_error=1"; }
