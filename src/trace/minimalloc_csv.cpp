// MiniMalloc CSV (id,lower,upper,size[,alignment][,offset]) as a trace:
// each buffer is an allocation at `lower` and a free at `upper`, so static
// plans can be replayed and drawn like any runtime trace; and a trace's
// lifetimes written as one, for the planner.
#include "gpumem/trace/minimalloc_csv.h"

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "gpumem/plan/csv.h"
#include "gpumem/trace/lifetimes.h"
#include "trace/text_lines.h"

namespace gpumem::trace {
namespace {

// The plan's offset when the file gives one. Otherwise a made-up address,
// distinct per buffer: (index + 1) << 32 in a file without offsets; in a
// file where only some buffers have one, 2^63 + index, past any offset
// (offsets stay under 2^50).
std::uint64_t address_of(const plan::CsvProblem& csv, std::size_t buffer) {
  if (buffer < csv.offsets.size() && csv.offsets[buffer]) return static_cast<std::uint64_t>(*csv.offsets[buffer]);
  if (!csv.has_offsets) return (static_cast<std::uint64_t>(buffer) + 1) << 32;
  return (std::uint64_t{1} << 63) + buffer;
}

}  // namespace

Trace read_minimalloc_csv(std::string_view data, const std::string& name, const ReadOptions&) {
  // parse_csv rejects any bad line with its number (there is nothing to
  // skip without --strict: a plan with a buffer missing is a different plan).
  plan::CsvProblem csv = plan::parse_csv(data, name);
  Trace trace;
  trace.format = "minimalloc-csv";
  trace.source = name;
  const std::vector<plan::Buffer>& buffers = csv.problem.buffers;

  // (time, kind, buffer): frees (kind 0) before allocations (kind 1) at the
  // same time, since lifetimes are half-open; file order breaks ties.
  struct Key {
    std::int64_t time;
    int kind;
    std::size_t buffer;
  };
  std::vector<Key> order;
  order.reserve(2 * buffers.size());
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    order.push_back({buffers[i].lower, 1, i});
    order.push_back({buffers[i].upper, 0, i});  // parse_csv ensures upper > lower
  }
  std::sort(order.begin(), order.end(), [](const Key& a, const Key& b) {
    if (a.time != b.time) return a.time < b.time;
    return a.kind != b.kind ? a.kind < b.kind : a.buffer < b.buffer;
  });

  std::vector<std::uint32_t> contexts(buffers.size());
  for (std::size_t i = 0; i < buffers.size(); ++i) contexts[i] = trace.intern(Context{buffers[i].id, {}});
  trace.events.reserve(order.size());
  for (const Key& k : order) {
    const plan::Buffer& b = buffers[k.buffer];
    Event e;
    e.action = k.kind == 1 ? Action::kAlloc : Action::kFreeCompleted;
    e.address = address_of(csv, k.buffer);
    e.size = b.size;
    e.time_ns = k.time;
    e.context = contexts[k.buffer];
    trace.events.push_back(e);
  }
  return trace;
}

void write_minimalloc_csv(const Trace& trace, std::int32_t device, bool strict, std::ostream& out) {
  const Lifetimes lifetimes = extract_lifetimes(trace, device == -2 ? busiest_device(trace) : device, strict);
  out << plan::write_csv(to_problem(lifetimes, trace.events.size()), {});
}

bool is_minimalloc_csv(std::string_view head) {
  const std::string_view line = detail::first_line(head);
  return line.find("lower") != std::string_view::npos && line.find("upper") != std::string_view::npos;
}

}  // namespace gpumem::trace
