// RMM's logging_resource_adaptor CSV to a Trace.
//
// The format, from RMM's include/rmm/mr/device/logging_resource_adaptor.hpp:
// the header "Thread,Time,Action,Pointer,Size,Stream", then one line per
// call, written by spdlog with the pattern "%t,%H:%M:%S.%f,%v": the thread
// id, the wall-clock time of day with microseconds, then "allocate",
// "allocate failure" (the pointer is null) or "free", the pointer, the size
// in bytes and the stream. Older RMM writes pointers and streams with
// fmt::ptr ("0x7f8a40000000", "0x0"); newer RMM with %llx, without "0x".
// RMM's documentation shows epoch seconds ("1634567890.123456") and
// "deallocate"; both are taken too.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/trace/rmm_log.h"
#include "trace/text_lines.h"

namespace gpumem::trace {
namespace {

using detail::parse_hex;
using detail::parse_whole;
using detail::trim;

constexpr std::int64_t kNsPerSecond = 1'000'000'000;
constexpr std::int64_t kNsPerDay = 86'400 * kNsPerSecond;

// Digits after a decimal point as nanoseconds ("123456" -> 123456000);
// digits past the ninth are dropped.
bool fraction_ns(std::string_view digits, std::int64_t& out) {
  if (digits.empty()) return false;
  out = 0;
  for (std::size_t i = 0; i < 9; ++i) {
    if (i < digits.size()) {
      if (digits[i] < '0' || digits[i] > '9') return false;
      out = out * 10 + (digits[i] - '0');
    } else {
      out *= 10;
    }
  }
  for (std::size_t i = 9; i < digits.size(); ++i)
    if (digits[i] < '0' || digits[i] > '9') return false;
  return true;
}

// "HH:MM:SS.ffffff" (nanoseconds since midnight, *of_day set) or
// "SECONDS.ffffff" since the epoch; false if neither.
bool parse_time(std::string_view s, std::int64_t& ns, bool& of_day) {
  std::int64_t fraction = 0;
  if (const std::size_t dot = s.find('.'); dot != std::string_view::npos) {
    if (!fraction_ns(s.substr(dot + 1), fraction)) return false;
    s = s.substr(0, dot);
  }
  if (s.find(':') == std::string_view::npos) {
    std::int64_t seconds = 0;
    if (!parse_whole(s, seconds) || seconds < 0 || seconds > 9'000'000'000) return false;
    ns = seconds * kNsPerSecond + fraction;
    of_day = false;
    return true;
  }
  if (s.size() != 8 || s[2] != ':' || s[5] != ':') return false;
  int h = 0, m = 0, sec = 0;
  if (!parse_whole(s.substr(0, 2), h) || !parse_whole(s.substr(3, 2), m) || !parse_whole(s.substr(6, 2), sec) ||
      h > 23 || m > 59 || sec > 60 || h < 0 || m < 0 || sec < 0)
    return false;
  ns = ((h * 60 + m) * 60 + sec) * kNsPerSecond + fraction;
  of_day = true;
  return true;
}

bool parse_action_name(std::string_view s, Action& out) {
  if (s == "allocate")
    out = Action::kAlloc;
  else if (s == "free" || s == "deallocate")
    out = Action::kFreeCompleted;
  else if (s == "allocate failure")
    out = Action::kOom;
  else
    return false;
  return true;
}

}  // namespace

Trace read_rmm_log(std::string_view data, const std::string& name, const ReadOptions& options) {
  Trace trace;
  trace.format = "rmm-log";
  trace.source = name;
  const std::string file = printable(name);
  detail::Lines lines(data);
  std::string_view line;
  while (lines.next(line) && trim(line).empty()) {
  }
  if (lines.number() == 0 || trim(line).empty())
    throw InputError(
        fmt::format("{}: empty file: no header line (expected Thread,Time,Action,Pointer,Size,Stream)", file));
  {
    // The header, with spaces around names allowed.
    const char* expected[] = {"Thread", "Time", "Action", "Pointer", "Size", "Stream"};
    std::size_t column = 0;
    bool ok = true;
    std::string_view rest = line;
    while (ok) {
      const std::size_t comma = rest.find(',');
      const std::string_view cell = trim(rest.substr(0, comma));
      ok = column < 6 && cell == expected[column];
      ++column;
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    if (!ok || column != 6)
      throw InputError(
          fmt::format("{}: line {}: not an RMM log header (expected Thread,Time,Action,Pointer,Size,Stream)", file,
                      lines.number()));
  }

  detail::SkippedLines skipped(file, options.strict, trace);
  auto problem = [&](const std::string& what) { skipped.skip(lines.number(), what); };
  // Times of day wrap at midnight: a time more than 12 hours before the
  // previous one is taken as the next day.
  std::int64_t day_offset = 0;
  std::int64_t previous = -1;
  std::string_view cells[6];
  while (lines.next(line)) {
    if (trim(line).empty()) continue;
    std::size_t count = 0;
    std::string_view rest = line;
    for (;;) {
      const std::size_t comma = rest.find(',');
      if (count < 6) cells[count] = trim(rest.substr(0, comma));
      ++count;
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    if (count != 6) {
      problem(fmt::format("{} fields, expected 6 (Thread,Time,Action,Pointer,Size,Stream)", count));
      continue;
    }
    Event e;
    if (!parse_action_name(cells[2], e.action)) {
      problem(fmt::format("unknown action '{}' (known: allocate, free, allocate failure)", printable(cells[2])));
      continue;
    }
    if (!parse_hex(cells[3], e.address)) {
      problem(fmt::format("pointer '{}' is not hexadecimal", printable(cells[3])));
      continue;
    }
    std::uint64_t size = 0;
    if (!parse_whole(cells[4], size) || size > static_cast<std::uint64_t>(INT64_MAX)) {
      problem(fmt::format("size '{}' is not a byte count", printable(cells[4])));
      continue;
    }
    e.size = static_cast<std::int64_t>(size);
    if (!parse_hex(cells[5], e.stream)) {
      problem(fmt::format("stream '{}' is not hexadecimal", printable(cells[5])));
      continue;
    }
    std::int64_t ns = 0;
    bool of_day = false;
    if (parse_time(cells[1], ns, of_day)) {
      if (of_day) {
        if (previous >= 0 && ns + day_offset < previous - kNsPerDay / 2) day_offset += kNsPerDay;
        ns += day_offset;
      }
      e.time_ns = ns;
      previous = ns;
    }
    trace.events.push_back(e);
  }
  skipped.finish();
  return trace;
}

bool is_rmm_log(std::string_view head) { return detail::body_of(head).starts_with("Thread,Time,Action"); }

}  // namespace gpumem::trace
