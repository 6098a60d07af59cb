#pragma once
// What the line-based trace readers (RMM log, gpumem history) share: the
// lines of a text with their numbers, and exact integer parsing.
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/trace/trace.h"

namespace gpumem::trace::detail {

// The text's lines, numbered from 1, without '\n' or a '\r' before it.
class Lines {
 public:
  explicit Lines(std::string_view text) : rest_(text) {}
  bool next(std::string_view& line) {
    if (rest_.empty()) return false;
    const std::size_t nl = rest_.find('\n');
    if (nl == std::string_view::npos) {
      line = rest_;
      rest_ = {};
    } else {
      line = rest_.substr(0, nl);
      rest_.remove_prefix(nl + 1);
    }
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    ++number_;
    return true;
  }
  std::size_t number() const { return number_; }

 private:
  std::string_view rest_;
  std::size_t number_ = 0;
};

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
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
      throw InputError(fmt::format("{}: {} (without --strict, such lines are skipped and counted)", file_, place));
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
