// Replaying a trace's allocations under allocator policies (each one run by
// alloc/policies/policy_run.h), and the planner's best packing of the same
// lifetimes.
#include "gpumem/trace/replay.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "gpumem/alloc/policies/policy_registry.h"
#include "gpumem/common/error.h"
#include "gpumem/common/progress.h"
#include "gpumem/plan/solver.h"
#include "gpumem/trace/formats.h"

namespace gpumem::trace {

alloc::AllocationSequence allocation_sequence(const Lifetimes& lifetimes, std::size_t events) {
  alloc::AllocationSequence seq;
  seq.positions = events;
  seq.sizes.reserve(lifetimes.allocations.size());
  seq.streams.reserve(lifetimes.allocations.size());
  // Bucket by event index: each event is at most one step.
  std::vector<std::int64_t> at(events, -1);
  std::vector<bool> is_free(events, false);
  for (std::size_t i = 0; i < lifetimes.allocations.size(); ++i) {
    const Allocation& a = lifetimes.allocations[i];
    seq.sizes.push_back(static_cast<std::size_t>(a.size));
    seq.streams.push_back(a.stream);
    at[a.alloc_event] = static_cast<std::int64_t>(i);
    if (a.free_event != kNeverFreed) {
      at[a.free_event] = static_cast<std::int64_t>(i);
      is_free[a.free_event] = true;
    }
  }
  seq.steps.reserve(lifetimes.allocations.size() * 2);
  for (std::size_t e = 0; e < events; ++e)
    if (at[e] >= 0) seq.steps.push_back({static_cast<std::uint32_t>(at[e]), is_free[e], e});
  return seq;
}

PolicyResult replay_policy(const Trace& trace, const Lifetimes& lifetimes, const std::string& policy,
                           std::size_t capacity) {
  return alloc::run_policy(alloc::policy_named(policy), allocation_sequence(lifetimes, trace.events.size()),
                           {.capacity = capacity});
}

bool every_policy_runs_out(const ReplayReport& report) {
  if (report.capacity == 0 || report.policies.empty()) return false;
  return std::all_of(report.policies.begin(), report.policies.end(),
                     [](const PolicyResult& p) { return p.oom_at_event.has_value(); });
}

ReplayReport replay(const Trace& trace, const ReplayOptions& options) {
  // Unknown names fail before any work.
  const std::vector<std::string> names =
      options.policies.empty() ? alloc::policy_names(&alloc::PolicyEntry::replayed_by_default) : options.policies;
  std::vector<const alloc::PolicyEntry*> entries;
  for (const std::string& n : names) entries.push_back(&alloc::policy_named(n));
  if (!options.current_policy.empty()) alloc::policy_named(options.current_policy);

  ReplayReport report;
  report.source = trace.source;
  report.format = trace.format;
  report.events = trace.events.size();
  report.capacity = options.capacity;
  report.device = options.device ? *options.device : busiest_device(trace);
  Lifetimes lifetimes = extract_lifetimes(trace, report.device, options.strict);
  report.anomalies = lifetimes.anomalies;
  report.allocations = lifetimes.allocations.size();

  const plan::Problem problem = to_problem(lifetimes, trace.events.size());
  report.lower_bound = plan::lower_bound(problem);
  report.traced_peak = report.lower_bound;
  report.baseline = lifetimes.baseline;

  const alloc::AllocationSequence sequence = allocation_sequence(lifetimes, trace.events.size());
  const std::vector<alloc::AllocationSequence::Step>& steps = sequence.steps;
  // Where iterations begin, as `trace stats` finds them.
  const IterationSplit split = find_iterations(lifetimes);
  report.iterations = split.starts.size();
  if (split.starts.size() >= 2) {
    std::int64_t allocated = 0;
    report.steady_peak_allocated = 0;
    for (const alloc::AllocationSequence::Step& s : steps) {
      const Allocation& a = lifetimes.allocations[s.allocation];
      allocated += s.free ? -a.size : a.size;
      if (!s.free && s.allocation >= split.starts[1])
        report.steady_peak_allocated = std::max(report.steady_peak_allocated, allocated);
    }
  }
  std::int64_t live = 0;
  for (const alloc::AllocationSequence::Step& s : steps) {
    const Allocation& a = lifetimes.allocations[s.allocation];
    live += s.free ? -a.size : a.size;
    if (!s.free && live == report.traced_peak) {
      report.traced_peak_event = a.alloc_event;  // the first time it is reached
      break;
    }
  }
  if (options.timeline_columns > 0)
    report.allocated_timeline = allocated_over_time(lifetimes, report.events, options.timeline_columns);
  if (!lifetimes.allocations.empty())
    report.live_at_peak = live_by_label(trace, lifetimes, report.traced_peak_event, 10);
  // Policies are independent (each its own simulated device over the same
  // read-only steps): one thread each.
  report.policies.resize(names.size());
  {
    Progress progress(fmt::format("replaying {} under {} policies", trace.source, names.size()),
                      steps.size() * names.size());
    std::vector<std::thread> threads;
    std::vector<std::exception_ptr> failures(names.size());
    for (std::size_t i = 0; i < names.size(); ++i) {
      threads.emplace_back([&, i] {
        try {
          report.policies[i] = alloc::run_policy(*entries[i], sequence,
                                                 {.capacity = options.capacity,
                                                  .timeline_columns = options.timeline_columns,
                                                  .progress = &progress,
                                                  .iteration_starts = split.starts.empty() ? nullptr : &split.starts});
        } catch (...) {
          failures[i] = std::current_exception();
        }
      });
    }
    for (std::thread& t : threads) t.join();
    for (const std::exception_ptr& failure : failures)
      if (failure) std::rethrow_exception(failure);
  }
  report.current_policy = options.current_policy.empty() ? recorded_policy(trace) : options.current_policy;
  report.advice = advise(report);

  if (options.optimal_time_limit > 0 && !problem.buffers.empty()) {
    plan::SolveOptions solve;
    solve.time_limit_seconds = options.optimal_time_limit;
    const Progress searching = Progress::timed(
        fmt::format("finding the optimal arena for {} allocations", problem.buffers.size()), solve.time_limit_seconds);
    plan::SolveResult best = plan::solve(problem, solve);
    report.optimal_arena = best.plan.arena;
    report.optimal_proven = best.optimal;
    report.optimal_seconds = best.seconds;
    if (options.timeline_columns > 0) report.optimal_offsets = best.plan.offsets;
  }
  return report;
}

}  // namespace gpumem::trace
