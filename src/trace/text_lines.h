#pragma once
// What the line-based trace readers (RMM log, gpumem history) share besides
// common/text.h: exact integer parsing and skipped-line accounting; and what
// every format's detector looks at (a file's first record).
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include "gpumem/common/flag_names.h"

#include <fmt/format.h>

#include "common/text.h"
#include "gpumem/common/error.h"
#include "gpumem/trace/trace.h"

namespace gpumem::trace::detail {

using text::Lines;
using text::trim;

// A file's first bytes without the blank space before its first record, and
// that record's line: what the formats' detectors look at.
inline std::string_view body_of(std::string_view head) {
  const std::size_t i = head.find_first_not_of(" \t\r\n");
  return i == std::string_view::npos ? std::string_view() : head.substr(i);
}
inline std::string_view first_line(std::string_view head) {
  const std::string_view body = body_of(head);
  return body.substr(0, body.find('\n'));
}

// The whole of `s` as an integer in `base`; false for anything else
// (empty, a sign where none belongs, trailing bytes, overflow).
template <typename T>
bool parse_whole(std::string_view s, T& out, int base = 10) {
  if (s.empty() || s.front() == '+') return false;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, out, base);
  return ec == std::errc() && ptr == end;
}

// Hex with or without "0x" (RMM writes both, depending on its version).
inline bool parse_hex(std::string_view s, std::uint64_t& out) {
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2);
  return parse_whole(s, out, 16);
}

// Lines a line-based reader cannot use: with --strict the first is an
// InputError; otherwise each is counted in the trace, and finish() leaves
// one warning quoting the first.
class SkippedLines {
 public:
  SkippedLines(const std::string& file, bool strict, Trace& trace) : file_(file), strict_(strict), trace_(trace) {}

  void skip(std::size_t line, const std::string& what) {
    std::string place = fmt::format("line {}: {}", line, what);
    if (strict_)
      throw InputError(
          fmt::format("{}: {} (without " GPUMEM_FLAG_STRICT ", such lines are skipped and counted)", file_, place));
    ++trace_.skipped_records;
    if (count_++ == 0) first_ = std::move(place);
  }

  void finish() {
    if (count_ > 0)
      trace_.warnings.push_back(
          fmt::format("{}: skipped {} lines that could not be used; the first: {}", file_, count_, first_));
  }

 private:
  const std::string& file_;
  bool strict_;
  Trace& trace_;
  std::uint64_t count_ = 0;
  std::string first_;
};

}  // namespace gpumem::trace::detail
