#pragma once
// `gpumem replay`: the trace's allocations, in order, on the simulated GPU
// under allocator policies, against the best packing the planner finds for
// the same lifetimes.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpumem/alloc/policies/policy_run.h"
#include "gpumem/common/envelope.h"
#include "gpumem/trace/lifetimes.h"
#include "gpumem/trace/trace.h"
#include "gpumem/trace/trace_stats.h"

namespace gpumem::trace {

// What one policy did over the trace (alloc/policies/policy_run.h):
// positions are the trace's event indices.
using PolicyResult = alloc::PolicyRun;

// A policy that would have done better than the one the trace was recorded
// under (ReplayReport::current_policy), and the setting that selects it.
struct Advice {
  std::string policy;
  std::string setting;             // the policy's PolicyEntry::setting
  std::int64_t peak_reserved = 0;  // this policy's
  // Peak reserved, the current policy's less this one's; 0 when the current
  // one ran out (its peak stops where it did).
  std::int64_t saved_bytes = 0;
  bool fits_where_current_does_not = false;  // with a capacity
};

struct ReplayOptions {
  // Names from the policy table (alloc/policies/policy_registry.h); empty:
  // those it marks replayed_by_default.
  std::vector<std::string> policies;
  // The policy the trace was recorded under, which advice compares against;
  // empty: recorded_policy(trace).
  std::string current_policy;
  std::size_t capacity = 0;         // device bytes; 0: unlimited (1 PiB)
  double optimal_time_limit = 5.0;  // seconds for the planner; 0 skips it
  bool strict = false;
  std::optional<std::int32_t> device;  // default: busiest_device()
  // Over 0: keep reserved and allocated bytes over time in this many
  // columns, and the optimal plan's offsets, for pictures (HTML reports).
  std::size_t timeline_columns = 0;
};

struct ReplayReport {
  std::string source;
  std::string format;
  std::size_t events = 0;
  std::int32_t device = 0;
  std::size_t allocations = 0;
  // The most bytes of the trace's own allocations live at once: memory
  // allocated before recording began (the baseline) is not replayed, so it
  // is left out, unlike TraceStats::peak_allocated.
  std::int64_t traced_peak = 0;
  std::size_t traced_peak_event = 0;
  std::int64_t baseline = 0;               // allocated before the first event (Lifetimes::baseline)
  std::int64_t lower_bound = 0;            // = traced_peak: no packing does better
  std::vector<ContextBytes> live_at_peak;  // at traced_peak_event, by label, up to 10
  std::int64_t optimal_arena = 0;          // the planner's arena; 0 when skipped
  bool optimal_proven = false;
  double optimal_seconds = 0;
  std::size_t capacity = 0;
  Anomalies anomalies;
  std::vector<PolicyResult> policies;
  std::string current_policy;  // empty: none (no advice)
  std::vector<Advice> advice;  // best first: fits, then saves the most
  // With ReplayOptions::timeline_columns: the trace's allocated bytes over
  // the event index (baseline left out), and the planner's offset for each
  // allocation (in Lifetimes order; empty when the planner was skipped).
  Envelope allocated_timeline;
  std::vector<std::int64_t> optimal_offsets;
  // When the trace repeats: its iterations (complete ones) and the most
  // bytes of the trace's allocations live after the first of them, which
  // steady_peak_reserved compares with.
  std::size_t iterations = 0;
  std::int64_t steady_peak_allocated = -1;
};

// The policies of a report that beat its current_policy: every one that
// fits where it runs out, or reserves less at the peak (BFC only against
// BFC: PyTorch has no setting for it). Empty when current_policy was not
// replayed.
std::vector<Advice> advise(const ReplayReport& report);

// Throws InputError for an unknown policy name (listing the known ones).
ReplayReport replay(const Trace& trace, const ReplayOptions& options);

// With a capacity, whether every policy replayed ran out of memory (the
// CLI's exit code 3, as `gpumem plan`'s when no plan fits).
bool every_policy_runs_out(const ReplayReport& report);

// The lifetimes as the sequence a policy runs (positions are event indices).
alloc::AllocationSequence allocation_sequence(const Lifetimes& lifetimes, std::size_t events);

// One policy over given lifetimes (for benchmarks and tests).
PolicyResult replay_policy(const Trace& trace, const Lifetimes& lifetimes, const std::string& policy,
                           std::size_t capacity);

}  // namespace gpumem::trace
