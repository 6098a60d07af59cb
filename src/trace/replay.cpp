// Replaying a trace's allocations under allocator policies, and the
// planner's best packing of the same lifetimes.
#include "gpumem/trace/replay.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "gpumem/alloc/bfc_allocator.h"
#include "gpumem/alloc/caching_allocator.h"
#include "gpumem/alloc/planned_allocator.h"
#include "gpumem/alloc/pool_resource.h"
#include "gpumem/alloc/simulated_device.h"
#include "gpumem/common/error.h"
#include "gpumem/common/progress.h"
#include "gpumem/plan/solver.h"

namespace gpumem::trace {
namespace {

using alloc::AllocatorConfig;
using alloc::CachingAllocator;
using alloc::MemoryResource;
using alloc::SimulatedDevice;

// "Unlimited": more than any device, small enough that an expandable
// range's per-granule table stays a few MiB.
constexpr std::size_t kUnlimited = std::size_t{2} << 40;

InputError unknown_policy(const std::string& name) {
  std::string known;
  for (const std::string& n : policy_names()) known += (known.empty() ? "" : ", ") + n;
  return InputError(fmt::format("--policy: unknown policy '{}' (known: {})", printable(name), known));
}

std::unique_ptr<MemoryResource> make_policy(const std::string& name, SimulatedDevice& device) {
  auto caching = [&](const char* config) {
    return std::make_unique<CachingAllocator>(alloc::simulated_upstream(device), alloc::parse_allocator_config(config));
  };
  if (name == "gpumem") return caching("");
  if (name == "gpumem-expandable") return caching("expandable_segments:true");
  if (name == "pytorch") return caching("preset:pytorch");
  if (name == "pytorch-expandable") return caching("preset:pytorch,expandable_segments:true");
  // TensorFlow's BFC with allow_growth, limited by the device.
  if (name == "bfc") return std::make_unique<alloc::BfcAllocator>(device, alloc::BfcOptions{});
  // RMM's pool, growing on demand (current RMM makes the initial size the
  // caller's choice; starting empty charges the pool only what it needs).
  if (name == "rmm-pool") return std::make_unique<alloc::PoolResource>(device, alloc::PoolResourceOptions{});
  // gpumem's defaults behind a plan of one recorded iteration (run() marks
  // the iterations).
  // The cache behind the plan grows expandable ranges: what stays between
  // iterations (weights, gradients, optimizer state) then pins granules,
  // not whole segments, once the transients move to the arena.
  if (name == "gpumem-planned")
    return std::make_unique<alloc::PlannedAllocator>(alloc::simulated_upstream(device),
                                                     alloc::parse_allocator_config("expandable_segments:true"));
  throw unknown_policy(name);
}

// One step of the replay: an allocation or the free of one.
struct Step {
  std::uint32_t allocation;
  bool free;
};

std::vector<Step> steps_of(const Lifetimes& lifetimes, std::size_t events) {
  // Bucket by event index: each event is at most one step.
  std::vector<std::int64_t> at(events, -1);
  std::vector<bool> is_free(events, false);
  for (std::size_t i = 0; i < lifetimes.allocations.size(); ++i) {
    const Allocation& a = lifetimes.allocations[i];
    at[a.alloc_event] = static_cast<std::int64_t>(i);
    if (a.free_event != kNeverFreed) {
      at[a.free_event] = static_cast<std::int64_t>(i);
      is_free[a.free_event] = true;
    }
  }
  std::vector<Step> steps;
  steps.reserve(lifetimes.allocations.size() * 2);
  for (std::size_t e = 0; e < events; ++e)
    if (at[e] >= 0) steps.push_back({static_cast<std::uint32_t>(at[e]), is_free[e]});
  return steps;
}

// What a replay may keep beyond the peaks, and what it may be told.
struct RunExtras {
  std::size_t events = 0;            // the trace's, for the timeline's x axis
  std::size_t timeline_columns = 0;  // 0: no timeline
  Progress* progress = nullptr;
  // Allocation indices where iterations begin (empty: the trace does not
  // repeat). gpumem-planned is told each; every policy's steady peak is
  // taken from the second on.
  const std::vector<std::size_t>* iteration_starts = nullptr;
};

PolicyResult run(const Lifetimes& lifetimes, const std::vector<Step>& steps, const std::string& name,
                 std::size_t capacity, const RunExtras& extras = {}) {
  PolicyResult r;
  r.name = name;
  const bool timeline = extras.timeline_columns > 0;
  if (timeline) r.reserved_timeline = Envelope(0, static_cast<std::int64_t>(extras.events), extras.timeline_columns);
  Progress* progress = extras.progress;
  const std::vector<std::size_t> no_starts;
  const std::vector<std::size_t>& starts = extras.iteration_starts ? *extras.iteration_starts : no_starts;
  std::size_t next_start = 0;
  bool steady = false;
  std::size_t steady_peak = 0;
  auto start = std::chrono::steady_clock::now();
  SimulatedDevice device({.capacity = capacity ? capacity : kUnlimited});
  {
    std::unique_ptr<MemoryResource> policy = make_policy(name, device);
    auto* planned = dynamic_cast<alloc::PlannedAllocator*>(policy.get());
    std::vector<void*> ptrs(lifetimes.allocations.size(), nullptr);
    std::int64_t live = 0;
    std::size_t peak = 0;
    std::size_t done = 0;
    for (const Step& s : steps) {
      if (progress && (++done & 4095) == 0) progress->advance(4096);
      const Allocation& a = lifetimes.allocations[s.allocation];
      const auto bytes = static_cast<std::size_t>(a.size);
      if (s.free) {
        policy->deallocate(ptrs[s.allocation], bytes, a.stream);
        ptrs[s.allocation] = nullptr;
        live -= a.size;
        if (steady) steady_peak = std::max(steady_peak, device.physical_used());
        if (timeline) {
          r.reserved_timeline.add(static_cast<std::int64_t>(a.free_event),
                                  static_cast<std::int64_t>(device.physical_used()));
        }
        continue;
      }
      if (next_start < starts.size() && s.allocation == starts[next_start]) {
        if (planned) planned->step();
        steady = steady || next_start >= 1;
        ++next_start;
      }
      try {
        ptrs[s.allocation] = policy->allocate(bytes, a.stream);
      } catch (const alloc::OutOfMemoryError& e) {
        r.oom_at_event = a.alloc_event;
        r.oom_message = e.what();
        break;
      }
      live += a.size;
      // While reservation stays at its peak, the most it held is what
      // counts: a cache reserved early fills up later.
      std::size_t reserved = device.physical_used();
      if (steady) steady_peak = std::max(steady_peak, reserved);
      if (timeline)
        r.reserved_timeline.add(static_cast<std::int64_t>(a.alloc_event), static_cast<std::int64_t>(reserved));
      if (reserved > peak) {
        peak = reserved;
        r.allocated_at_peak = live;
      } else if (reserved == peak && live > r.allocated_at_peak) {
        r.allocated_at_peak = live;
      }
    }
    r.peak_reserved = static_cast<std::int64_t>(peak);
    if (starts.size() >= 2) r.steady_peak_reserved = static_cast<std::int64_t>(steady_peak);
    if (planned) {
      r.planned_allocations = planned->planned_stats().planned;
      r.missed_allocations = planned->planned_stats().missed;
    }
    r.fragmentation_at_peak = peak ? 1.0 - double(r.allocated_at_peak) / double(peak) : 0.0;
    // Frees left for the policy's destructor are not the trace's: count the
    // calls made while replaying.
    r.upstream_calls = device.counters().upstream_calls();
    for (std::size_t i = 0; i < ptrs.size(); ++i)
      if (ptrs[i])
        policy->deallocate(ptrs[i], static_cast<std::size_t>(lifetimes.allocations[i].size),
                           lifetimes.allocations[i].stream);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace

const std::vector<std::string>& policy_names() {
  static const std::vector<std::string> names = {"gpumem", "gpumem-expandable", "pytorch",       "pytorch-expandable",
                                                 "bfc",    "rmm-pool",          "gpumem-planned"};
  return names;
}

const std::vector<std::string>& default_policy_names() {
  static const std::vector<std::string> names(policy_names().begin(), policy_names().end() - 1);
  return names;
}

PolicyResult replay_policy(const Trace& trace, const Lifetimes& lifetimes, const std::string& policy,
                           std::size_t capacity) {
  return run(lifetimes, steps_of(lifetimes, trace.events.size()), policy, capacity,
             {.events = trace.events.size(), .timeline_columns = 0, .progress = nullptr, .iteration_starts = nullptr});
}

bool every_policy_runs_out(const ReplayReport& report) {
  if (report.capacity == 0 || report.policies.empty()) return false;
  return std::all_of(report.policies.begin(), report.policies.end(),
                     [](const PolicyResult& p) { return p.oom_at_event.has_value(); });
}

ReplayReport replay(const Trace& trace, const ReplayOptions& options) {
  // Unknown names fail before any work.
  std::vector<std::string> names = options.policies.empty() ? default_policy_names() : options.policies;
  for (const std::string& n : names)
    if (std::find(policy_names().begin(), policy_names().end(), n) == policy_names().end()) throw unknown_policy(n);
  if (!options.current_policy.empty() &&
      std::find(policy_names().begin(), policy_names().end(), options.current_policy) == policy_names().end())
    throw unknown_policy(options.current_policy);

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

  const std::vector<Step> steps = steps_of(lifetimes, trace.events.size());
  // Where iterations begin, as `trace stats` finds them.
  const IterationSplit split = find_iterations(lifetimes);
  report.iterations = split.starts.size();
  if (split.starts.size() >= 2) {
    std::int64_t allocated = 0;
    report.steady_peak_allocated = 0;
    for (const Step& s : steps) {
      const Allocation& a = lifetimes.allocations[s.allocation];
      allocated += s.free ? -a.size : a.size;
      if (!s.free && s.allocation >= split.starts[1])
        report.steady_peak_allocated = std::max(report.steady_peak_allocated, allocated);
    }
  }
  std::int64_t live = 0;
  for (const Step& s : steps) {
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
          report.policies[i] =
              run(lifetimes, steps, names[i], options.capacity,
                  {report.events, options.timeline_columns, &progress, split.starts.empty() ? nullptr : &split.starts});
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
