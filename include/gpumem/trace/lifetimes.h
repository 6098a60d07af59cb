#pragma once
// From events to allocations with lifetimes: pairs every allocation with the
// free that ends it, and finds what makes no sense in a trace (a free of an
// unknown address, a double free, an allocation at an address still live, a
// negative size). With strict, the first such event is an InputError naming
// its number; otherwise it is skipped and counted.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gpumem/common/envelope.h"
#include "gpumem/plan/problem.h"
#include "gpumem/trace/trace.h"

namespace gpumem::trace {

inline constexpr std::size_t kNeverFreed = SIZE_MAX;

struct Allocation {
  std::size_t alloc_event = 0;           // index in Trace::events
  std::size_t free_event = kNeverFreed;  // the event that returns it
  std::uint64_t address = 0;
  std::int64_t size = 0;
  std::uint64_t stream = 0;
  std::int32_t device = 0;
  std::uint32_t context = 0;
};

struct Anomalies {
  std::uint64_t unknown_frees = 0;        // address never allocated in the trace
  std::uint64_t double_frees = 0;         // address already freed
  std::uint64_t live_address_allocs = 0;  // allocation at an address still live
  std::uint64_t negative_sizes = 0;
  std::vector<std::string> examples;  // the first few, one line each
  std::uint64_t total() const { return unknown_frees + double_frees + live_address_allocs + negative_sizes; }
};

struct Lifetimes {
  std::int32_t device = 0;
  std::vector<Allocation> allocations;  // in allocation order
  // Bytes allocated before the trace's first event, when the source reports
  // running totals (torch.profiler's "Total Allocated"); else 0.
  std::int64_t baseline = 0;
  // Frees of memory allocated before the trace (unknown addresses) in a
  // trace with running totals: they lower the baseline at that event.
  std::vector<std::pair<std::size_t, std::int64_t>> baseline_frees;  // event, bytes
  Anomalies anomalies;
  // Which event ends an allocation: free_completed when the trace has any,
  // else free_requested (sources that record only the caller's free).
  Action free_action = Action::kFreeCompleted;
  // The allocations where the source's own steps begin (Trace::
  // profiler_steps that allocate on this device), and the first allocation
  // after the last step ends; empty when the source marks none.
  std::vector<std::size_t> step_starts;
  std::size_t steps_end = 0;
  // Two steps or more: the source's marks are the iterations.
  bool steps_mark_iterations() const { return step_starts.size() >= 2; }
};

// The device with the most allocations, preferring GPUs (device >= 0); in a
// snapshot without history, the one whose segments reserve the most.
std::int32_t busiest_device(const Trace& trace);
// "device 0", or "CPU (device -1)" for the host's allocations, as
// torch.profiler records them on CPU.
std::string device_name(std::int32_t device);

// Allocations of one device.
Lifetimes extract_lifetimes(const Trace& trace, std::int32_t device, bool strict);

// The lifetimes as a planning problem: one buffer per allocation, alive from
// its allocation event to its free event (the trace's end if never freed),
// named by its allocation's index. MiniMalloc CSV is this, written out.
plan::Problem to_problem(const Lifetimes& lifetimes, std::size_t events);

// The bytes of the lifetimes' allocations live after each of the trace's
// `events` (baseline left out), kept as `columns` min/max columns.
Envelope allocated_over_time(const Lifetimes& lifetimes, std::size_t events, std::size_t columns);

}  // namespace gpumem::trace
