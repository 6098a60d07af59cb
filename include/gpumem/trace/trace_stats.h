#pragma once
// `gpumem trace stats`: what a trace says about memory. The peak and when,
// the largest allocations, what was never freed (grouped by tag or stack),
// and, when the trace repeats (training iterations, decoding steps), how the
// memory left behind grows from one iteration to the next: the two shapes of
// a leak users report are steady growth and a one-time step.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpumem/trace/lifetimes.h"
#include "gpumem/trace/trace.h"

namespace gpumem::trace {

struct ContextBytes {
  // Context::label(), then " in " and Context::user_frame() when the context
  // has a tag and a user's frame ("aten::empty in step (train.py:200)"), or
  // "(no tag)".
  std::string label;
  std::uint64_t count = 0;
  std::int64_t bytes = 0;
};

struct LargestAllocation {
  std::size_t event = 0;
  std::int64_t size = 0;
  bool freed = false;
  std::string label;
};

struct IterationReport {
  bool repeats = false;
  bool from_profiler_steps = false;             // the source's ProfilerStep spans, not a repeating pattern
  std::size_t period = 0;                       // allocations per iteration (the last complete one's)
  std::size_t first_allocation = 0;             // where the first iteration starts
  std::size_t iterations = 0;                   // complete iterations seen
  std::size_t first_iteration_allocations = 0;  // more than period when it sets up state
  std::size_t period_events = 0;                // trace events in the last complete iteration
  std::int64_t bytes_per_iteration = 0;         // allocated in the last complete iteration
  // Bytes live (trace allocations, baseline included) at each iteration's
  // trough: its lowest point, where its own temporaries and the previous
  // step's gradients are gone. The same point of every iteration, wherever
  // the loop frees what (zero_grad at the top or the end, accumulation),
  // and what the Prometheus leak rule watches (min_over_time of allocated
  // bytes); never the end of the recording.
  std::vector<std::int64_t> live_at_trough;
  std::vector<std::size_t> trough_events;  // where each trough is
  std::string shape;                       // "flat", "steady growth", "step"
  std::int64_t growth_per_iteration = 0;   // steady: the median step between troughs; step: the step
  std::size_t step_iteration = 0;          // step: the iteration (0-based) after which it grew
  // What grows, by label, largest first, up to 10: steady growth, from the
  // second trough to the last; a step, across it.
  std::vector<ContextBytes> growing;
};

// The allocator's state that a PyTorch snapshot's segments describe, for
// one device, at the moment the snapshot was taken.
struct SegmentState {
  bool present = false;  // the trace has segments for the device
  std::size_t segments = 0;
  std::int64_t reserved = 0;            // the segments' total_size
  std::int64_t allocated = 0;           // active_allocated blocks
  std::int64_t pending_free = 0;        // active_pending_free: freed, waiting on a stream
  std::int64_t largest_free_block = 0;  // the largest inactive block
  std::vector<ContextBytes> live;       // active_allocated blocks by label, largest first, up to 10
};

// An out-of-memory error in a trace (a snapshot's "oom" entry, the
// profiler's [OutOfMemory]), with the figures PyTorch's own message gives.
struct OomReport {
  std::size_t event = 0;
  std::int64_t time_ns = kUnknown;
  std::int64_t requested = 0;    // the request that failed
  std::int64_t device_free = 0;  // the device's free memory then (snapshots; 0 when unknown)
  // Where reserved, allocated and the largest free block come from: the
  // history up to the error (segment events and live allocations), or,
  // when the history has no segment events before it, the segments at the
  // snapshot.
  bool from_history = false;
  // Neither: a log without segments (RMM's), where only the allocations
  // live at the error are known; reserved is then 0 and means unknown.
  bool reserved_known = true;
  std::int64_t reserved = 0;
  std::int64_t allocated = 0;
  std::int64_t largest_free_block = 0;
  std::string label;  // where the request came from, or "(no tag)"
};

struct TraceStats {
  std::string format;
  std::size_t events = 0;
  std::map<std::string, std::uint64_t> actions;  // action name -> events
  std::int32_t device = 0;
  std::size_t allocations = 0;
  std::size_t frees = 0;
  std::int64_t allocated_bytes_total = 0;  // sum of allocation sizes
  std::int64_t baseline = 0;
  std::int64_t peak_allocated = 0;  // baseline included
  std::size_t peak_event = 0;
  std::int64_t peak_time_ns = kUnknown;
  std::int64_t start_time_ns = kUnknown;  // the first event's time
  // The most bytes of the trace's own allocations live at once, baseline
  // left out: what `gpumem replay` replays (ReplayReport::traced_peak).
  std::int64_t traced_peak = 0;
  std::size_t traced_peak_event = 0;
  // The source's own largest "Total Allocated", when it reports one.
  std::int64_t source_peak_allocated = kUnknown;
  std::vector<LargestAllocation> largest;  // up to 10
  std::uint64_t never_freed = 0;
  std::int64_t never_freed_bytes = 0;
  std::vector<ContextBytes> never_freed_by_context;  // largest first, up to 10
  // What is live at the peak (peak_event), by label, largest first, up to
  // 10; what was allocated before recording began and is still live then
  // is apart, in live_at_peak_baseline.
  std::vector<ContextBytes> live_at_peak;
  std::int64_t live_at_peak_baseline = 0;
  IterationReport iterations;
  SegmentState segments;
  std::vector<OomReport> ooms;  // up to 10, in order
  Anomalies anomalies;
  std::vector<std::string> warnings;  // the reader's
};

TraceStats trace_stats(const Trace& trace, const Lifetimes& lifetimes);

// Context::label() with the user's frame, or "(no tag)": ContextBytes::label.
std::string context_label(const Trace& trace, std::uint32_t context);

// Byte counts per context merged by label (contexts that differ only in
// frames gpumem does not show share one), largest first, at most `top`.
std::vector<ContextBytes> merge_by_label(const Trace& trace,
                                         const std::unordered_map<std::uint32_t, ContextBytes>& by_context,
                                         std::size_t top);

// The state of one device's segments (snapshot_state.cpp).
SegmentState segment_state(const Trace& trace, std::int32_t device);
// The out-of-memory errors of the lifetimes' device, up to 10
// (snapshot_state.cpp).
std::vector<OomReport> oom_reports(const Trace& trace, const Lifetimes& lifetimes);

// The allocations live right after `event` (allocated at or before it, freed
// after it), grouped by label (ContextBytes), largest first, at most `top`.
std::vector<ContextBytes> live_by_label(const Trace& trace, const Lifetimes& lifetimes, std::size_t event,
                                        std::size_t top);

// Where the iterations of a sequence of allocation keys (size and context
// of each allocation, in order) begin: starts[k] is the first allocation of
// complete iteration k, and the last one ends at `end` (the allocations
// after it, a partial iteration, are not counted). Empty when fewer than two
// complete iterations are found. Tolerates a first iteration that allocates
// more (optimizer state), set-up allocations before it, and reordering
// within iterations (iterations.cpp says how).
struct IterationSplit {
  std::vector<std::size_t> starts;
  std::size_t end = 0;
};
IterationSplit find_iterations(const std::vector<std::uint64_t>& keys);
// The same over a trace's allocations, keyed by size and context; or,
// where the source marks two steps or more (Lifetimes::step_starts), those.
IterationSplit find_iterations(const Lifetimes& lifetimes);

// The allocations of the last complete iteration (the steady one: the first
// may allocate more), or 0 when the keys do not repeat.
std::size_t find_period(const std::vector<std::uint64_t>& keys);

}  // namespace gpumem::trace
