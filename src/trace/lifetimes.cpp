// Pairing allocations with their frees, and the anomalies in between.
#include "gpumem/trace/lifetimes.h"
#include "gpumem/common/flag_names.h"

#include <map>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/common/units.h"

namespace gpumem::trace {
namespace {

constexpr std::size_t kExamples = 5;

class Checker {
 public:
  Checker(const Trace& trace, bool strict, Anomalies& out) : trace_(trace), strict_(strict), out_(out) {}

  void report(std::uint64_t& counter, std::size_t event, const std::string& problem) {
    std::string line = fmt::format("{}: event {}: {}", printable(trace_.source), event, problem);
    if (strict_) throw InputError(line + " (without " GPUMEM_FLAG_STRICT ", such events are skipped and counted)");
    ++counter;
    if (out_.examples.size() < kExamples) out_.examples.push_back(std::move(line));
  }

 private:
  const Trace& trace_;
  bool strict_;
  Anomalies& out_;
};

// Lifetimes::step_starts and steps_end from the source's step spans: a step
// begins with its first allocation; a step that allocates nothing on this
// device is no iteration of it.
void mark_steps(const Trace& trace, Lifetimes& out) {
  const auto time_of = [&](std::size_t allocation) {
    return trace.events[out.allocations[allocation].alloc_event].time_ns;
  };
  std::size_t next = 0;
  for (const Trace::StepSpan& step : trace.profiler_steps) {
    while (next < out.allocations.size() && time_of(next) < step.start_ns) ++next;
    if (next == out.allocations.size() || time_of(next) > step.end_ns) continue;
    if (out.step_starts.empty() || next > out.step_starts.back()) out.step_starts.push_back(next);
    while (next < out.allocations.size() && time_of(next) <= step.end_ns) ++next;
    out.steps_end = next;
  }
}

}  // namespace

std::string device_name(std::int32_t device) {
  return device == -1 ? std::string("CPU (device -1)") : fmt::format("device {}", device);
}

std::int32_t busiest_device(const Trace& trace) {
  std::map<std::int32_t, std::uint64_t> allocs;
  for (const Event& e : trace.events)
    if (e.action == Action::kAlloc) ++allocs[e.device];
  // A snapshot without history: the device whose segments hold the most.
  if (allocs.empty())
    for (const SnapshotSegment& s : trace.segments) allocs[s.device] += static_cast<std::uint64_t>(s.total_size);
  std::int32_t best = 0;
  std::uint64_t best_count = 0;
  bool best_gpu = false;
  for (auto [device, count] : allocs) {
    bool gpu = device >= 0;
    if ((gpu && !best_gpu) || (gpu == best_gpu && count > best_count)) {
      best = device;
      best_count = count;
      best_gpu = gpu;
    }
  }
  return best;
}

Lifetimes extract_lifetimes(const Trace& trace, std::int32_t device, bool strict) {
  Lifetimes out;
  out.device = device;
  bool has_completed = false;
  for (const Event& e : trace.events)
    if (e.action == Action::kFreeCompleted && e.device == device) has_completed = true;
  out.free_action = has_completed ? Action::kFreeCompleted : Action::kFreeRequested;

  Checker check(trace, strict, out.anomalies);
  std::unordered_map<std::uint64_t, std::size_t> live;  // address -> allocation index
  std::unordered_set<std::uint64_t> freed;              // addresses freed and not reused
  bool baseline_known = false;
  for (std::size_t i = 0; i < trace.events.size(); ++i) {
    const Event& e = trace.events[i];
    if (e.device != device) continue;
    if (e.action == Action::kAlloc) {
      if (!baseline_known && e.total_allocated != kUnknown) {
        out.baseline = e.total_allocated - e.size;
        baseline_known = true;
      }
      if (e.size < 0) {
        check.report(out.anomalies.negative_sizes, i, fmt::format("allocation of a negative size ({})", e.size));
        continue;
      }
      if (auto it = live.find(e.address); it != live.end()) {
        check.report(out.anomalies.live_address_allocs, i,
                     fmt::format("allocation at {:#x}, which is still live (allocated at event {})", e.address,
                                 out.allocations[it->second].alloc_event));
        continue;
      }
      live.emplace(e.address, out.allocations.size());
      freed.erase(e.address);
      out.allocations.push_back({i, kNeverFreed, e.address, e.size, e.stream, e.device, e.context});
    } else if (e.action == out.free_action) {
      if (!baseline_known && e.total_allocated != kUnknown) {
        out.baseline = e.total_allocated + e.size;
        baseline_known = true;
      }
      auto it = live.find(e.address);
      if (it == live.end()) {
        // Memory from before the trace: expected when recording starts
        // mid-run, so it is counted but lowers the baseline rather than
        // being an error in its own right.
        if (baseline_known && !freed.count(e.address) && e.size > 0) out.baseline_frees.emplace_back(i, e.size);
        if (freed.count(e.address))
          check.report(out.anomalies.double_frees, i, fmt::format("double free of {:#x}", e.address));
        else
          check.report(out.anomalies.unknown_frees, i,
                       fmt::format("free of {:#x}, which the trace never allocated", e.address));
        continue;
      }
      out.allocations[it->second].free_event = i;
      live.erase(it);
      freed.insert(e.address);
    }
  }
  mark_steps(trace, out);
  return out;
}

plan::Problem to_problem(const Lifetimes& lifetimes, std::size_t events) {
  plan::Problem problem;
  problem.buffers.reserve(lifetimes.allocations.size());
  for (std::size_t i = 0; i < lifetimes.allocations.size(); ++i) {
    const Allocation& a = lifetimes.allocations[i];
    const std::size_t end = a.free_event == kNeverFreed ? events : a.free_event;
    problem.buffers.push_back({std::to_string(i), static_cast<std::int64_t>(a.alloc_event),
                               static_cast<std::int64_t>(end), a.size, 1, std::nullopt});
  }
  return problem;
}

Envelope allocated_over_time(const Lifetimes& lifetimes, std::size_t events, std::size_t columns) {
  // An event allocates or frees at most one allocation: the change at each.
  std::vector<std::int64_t> change(events, 0);
  for (const Allocation& a : lifetimes.allocations) {
    if (a.alloc_event < events) change[a.alloc_event] += a.size;
    if (a.free_event < events) change[a.free_event] -= a.size;
  }
  Envelope envelope(0, static_cast<std::int64_t>(events), columns);
  std::int64_t live = 0;
  for (std::size_t e = 0; e < events; ++e) {
    if (change[e] == 0) continue;
    live += change[e];
    envelope.add(static_cast<std::int64_t>(e), live);
  }
  return envelope;
}

}  // namespace gpumem::trace
