// libFuzzer target: arbitrary bytes through the line- and JSON-based trace
// readers (torch.profiler Chrome trace, RMM log, gpumem history), and what
// they accept through the writers.
//
// The contract under test: a reader returns a Trace or throws
// gpumem::InputError, in both modes. Beyond that: a strict read that
// succeeds is the non-strict read with nothing skipped; Chrome trace events
// come out in time order; write_history then read_history gives the same
// events back; write_perfetto writes JSON that parses. Anything else aborts
// (an escaping exception is a crash for libFuzzer), as does any sanitizer
// report.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gpumem/common/error.h"
#include "gpumem/trace/chrome_trace_reader.h"
#include "gpumem/trace/history_format.h"
#include "gpumem/trace/perfetto_writer.h"
#include "gpumem/trace/rmm_log.h"

#include "fuzz_check.h"

using gpumem::fuzz::check;

namespace {

using gpumem::trace::Event;
using gpumem::trace::ReadOptions;
using gpumem::trace::Trace;

bool same_events(const Trace& a, const Trace& b) {
  if (a.events.size() != b.events.size()) return false;
  for (std::size_t i = 0; i < a.events.size(); ++i) {
    const Event& x = a.events[i];
    const Event& y = b.events[i];
    if (x.action != y.action || x.address != y.address || x.size != y.size || x.stream != y.stream ||
        x.time_ns != y.time_ns || x.device != y.device || x.total_allocated != y.total_allocated ||
        x.total_reserved != y.total_reserved || a.contexts.at(x.context) != b.contexts.at(y.context))
      return false;
  }
  return true;
}

// Reads in both modes; returns whether the lenient read succeeded.
template <typename Read>
bool read_both(Read read, std::string_view text, Trace& lenient) {
  bool strict_ok = false;
  Trace strict;
  try {
    strict = read(text, ReadOptions{.strict = true});
    strict_ok = true;
  } catch (const gpumem::InputError&) {
  }
  try {
    lenient = read(text, ReadOptions{});
  } catch (const gpumem::InputError&) {
    check(!strict_ok);  // strict accepted what lenient rejected
    return false;
  }
  if (strict_ok) check(lenient.skipped_records == 0 && same_events(strict, lenient));
  return true;
}

// What the writers make of an accepted trace.
void check_writers(const Trace& t) {
  std::ostringstream history;
  gpumem::trace::write_history(t, history);
  const Trace again = gpumem::trace::read_history(history.str(), "again.jsonl", ReadOptions{.strict = true});
  check(again.events.size() == t.events.size());
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const Event& x = t.events[i];
    const Event& y = again.events[i];
    check(x.action == y.action && x.address == y.address && x.size == y.size && x.stream == y.stream &&
          x.time_ns == y.time_ns && x.device == y.device &&
          t.contexts.at(x.context).label() == again.contexts.at(y.context).label());
  }
  if (t.events.size() <= 2000) {
    std::ostringstream perfetto;
    gpumem::trace::write_perfetto(t, perfetto);
    check(nlohmann::json::accept(perfetto.str()));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Trace t;
  if (read_both(
          [](std::string_view s, const ReadOptions& o) { return gpumem::trace::read_chrome_trace(s, "fuzz.json", o); },
          text, t)) {
    check(std::is_sorted(t.events.begin(), t.events.end(),
                         [](const Event& a, const Event& b) { return a.time_ns < b.time_ns; }));
    for (const Event& e : t.events) check(e.size >= 0 && e.context < t.contexts.size());
    check_writers(t);
  }
  if (read_both([](std::string_view s, const ReadOptions& o) { return gpumem::trace::read_rmm_log(s, "fuzz.csv", o); },
                text, t))
    check_writers(t);
  if (read_both(
          [](std::string_view s, const ReadOptions& o) { return gpumem::trace::read_history(s, "fuzz.jsonl", o); },
          text, t))
    check_writers(t);
  return 0;
}

// Sanitizer reports with a stack, and every UB report is fatal.
extern "C" const char* __ubsan_default_options() { return "print_stacktrace=1:halt_on_error=1"; }
