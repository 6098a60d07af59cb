// libFuzzer target: arbitrary bytes through the PyTorch snapshot reader,
// strict and lenient, then the writer on whatever it accepts.
//
// The contract under test: read_pytorch_snapshot either returns a trace or
// throws gpumem::InputError, whatever the bytes (a pickle that asks for code
// is refused, never run). Once a trace is accepted, writing it (protocols 2
// and 4) and reading that back strictly must give the same events, contexts
// and segments. Anything else aborts (a crash for libFuzzer), as does any
// sanitizer report.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>

#include "gpumem/common/error.h"
#include "gpumem/trace/pytorch_snapshot.h"

#include "fuzz_check.h"

using gpumem::fuzz::check;

namespace {

using gpumem::trace::Trace;

bool same_events(const Trace& a, const Trace& b) {
  if (a.events.size() != b.events.size()) return false;
  for (std::size_t i = 0; i < a.events.size(); ++i) {
    const auto& x = a.events[i];
    const auto& y = b.events[i];
    if (x.action != y.action || x.device != y.device || x.address != y.address || x.size != y.size ||
        x.stream != y.stream || x.time_ns != y.time_ns || !(a.contexts[x.context] == b.contexts[y.context])) {
      return false;
    }
  }
  return true;
}

bool same_segments(const Trace& a, const Trace& b) {
  if (a.segments.size() != b.segments.size()) return false;
  for (std::size_t i = 0; i < a.segments.size(); ++i) {
    const auto& x = a.segments[i];
    const auto& y = b.segments[i];
    if (x.device != y.device || x.address != y.address || x.total_size != y.total_size || x.stream != y.stream ||
        x.segment_type != y.segment_type || x.expandable != y.expandable || x.blocks.size() != y.blocks.size()) {
      return false;
    }
    for (std::size_t j = 0; j < x.blocks.size(); ++j) {
      const auto& p = x.blocks[j];
      const auto& q = y.blocks[j];
      if (p.address != q.address || p.size != q.size || p.requested_size != q.requested_size || p.state != q.state ||
          !(a.contexts[p.context] == b.contexts[q.context])) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  for (const bool strict : {true, false}) {
    Trace trace;
    try {
      trace = gpumem::trace::read_pytorch_snapshot(bytes, "fuzz.pickle", {.strict = strict});
    } catch (const gpumem::InputError&) {
      continue;  // rejected with a message: the expected outcome for bad input
    }
    check(trace.format == "pytorch-snapshot");
    for (const auto& e : trace.events) check(e.size >= 0 && e.context < trace.contexts.size() && e.device >= 0);
    if (strict) check(trace.warnings.empty() && trace.skipped_records == 0);
    for (const int protocol : {2, 4}) {
      std::ostringstream out;
      gpumem::trace::write_pytorch_snapshot(trace, out, protocol);
      // What gpumem writes, gpumem reads strictly; a throw here aborts.
      const Trace again = gpumem::trace::read_pytorch_snapshot(out.str(), "roundtrip.pickle", {.strict = true});
      check(same_events(trace, again));
      check(same_segments(trace, again));
    }
  }
  return 0;
}

// Sanitizer reports with a stack, and every UB report is fatal.
extern "C" const char* __ubsan_default_options() { return "print_stacktrace=1:halt_on_error=1"; }
