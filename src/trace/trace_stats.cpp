// Statistics of a trace, and the leak shape across iterations.
#include "gpumem/trace/trace_stats.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <unordered_map>

namespace gpumem::trace {

std::string context_label(const Trace& trace, std::uint32_t context) {
  if (context >= trace.contexts.size()) return "(no tag)";
  const Context& c = trace.contexts[context];
  std::string label = c.label();
  if (label.empty()) return "(no tag)";
  // An operator says what; the user's Python frame says where.
  if (!c.tag.empty())
    if (std::string where = c.user_frame(); !where.empty()) label += " in " + where;
  return label;
}

std::vector<ContextBytes> merge_by_label(const Trace& trace,
                                         const std::unordered_map<std::uint32_t, ContextBytes>& by_context,
                                         std::size_t top) {
  std::unordered_map<std::string, ContextBytes> merged;
  for (const auto& [context, c] : by_context) {
    ContextBytes& m = merged[context_label(trace, context)];
    m.count += c.count;
    m.bytes += c.bytes;
  }
  std::vector<ContextBytes> out;
  for (auto& [label, c] : merged) {
    c.label = label;
    out.push_back(c);
  }
  std::sort(out.begin(), out.end(), [](const ContextBytes& a, const ContextBytes& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.label < b.label;
  });
  if (out.size() > top) out.resize(top);
  return out;
}

namespace {

// Allocations grouped by label, largest first, at most `top`.
template <typename Keep>
std::vector<ContextBytes> by_label(const Trace& trace, const Lifetimes& lifetimes, Keep keep, std::size_t top) {
  std::unordered_map<std::uint32_t, ContextBytes> by_context;
  for (const Allocation& a : lifetimes.allocations) {
    if (!keep(a)) continue;
    ContextBytes& c = by_context[a.context];
    ++c.count;
    c.bytes += a.size;
  }
  return merge_by_label(trace, by_context, top);
}

std::uint64_t key_of(const Allocation& a) {
  return static_cast<std::uint64_t>(a.size) * 0x9E3779B97F4A7C15ull ^ (std::uint64_t{a.context} << 1);
}

// Classifies the troughs of the iterations. Changes under 1% of what one
// iteration allocates count as noise: the level itself may be mostly memory
// from before the trace. A leak is growth that repeats: between at least two
// pairs of troughs, in at least half of them, and not given back (drops
// would cancel it: the troughs of gradient accumulation's micro-steps rise
// and fall). Growth once (optimizer states made in the first step, a cache
// warming up) is a step.
void classify(IterationReport& r, std::int64_t bytes_per_iteration) {
  const std::vector<std::int64_t>& level = r.live_at_trough;
  if (level.size() < 2) {
    r.shape = "flat";
    return;
  }
  std::vector<std::int64_t> deltas;
  for (std::size_t i = 1; i < level.size(); ++i) deltas.push_back(level[i] - level[i - 1]);
  const std::int64_t noise = std::max<std::int64_t>(bytes_per_iteration / 100, 1);
  std::size_t growing = 0;
  std::size_t biggest = 0;
  std::int64_t dropped = 0;
  for (std::size_t i = 0; i < deltas.size(); ++i) {
    if (deltas[i] > noise) ++growing;
    if (deltas[i] < -noise) dropped -= deltas[i];
    if (deltas[i] > deltas[biggest]) biggest = i;
  }
  const std::int64_t total = level.back() - level.front();
  // The same growth, exactly, between the last three troughs or more: a
  // leak however small (a 0-dim loss kept each step), not noise.
  std::size_t same = 0;
  while (same < deltas.size() && deltas[deltas.size() - 1 - same] > 0 &&
         deltas[deltas.size() - 1 - same] == deltas.back())
    ++same;
  if (same >= 3) {
    r.shape = "steady growth";
    r.growth_per_iteration = deltas.back();
  } else if (total <= noise) {
    r.shape = "flat";
  } else if (growing >= 2 && growing * 2 >= deltas.size() && dropped * 2 < total) {
    r.shape = "steady growth";
    // The median step: what the first iteration sets up once (optimizer
    // states, gradients) would skew a mean.
    std::vector<std::int64_t> sorted = deltas;
    std::nth_element(sorted.begin(), sorted.begin() + static_cast<long>(sorted.size() / 2), sorted.end());
    r.growth_per_iteration = sorted[sorted.size() / 2];
  } else {
    r.shape = "step";
    r.growth_per_iteration = deltas[biggest];
    r.step_iteration = biggest;
  }
}

// Whether the iterations after the first allocate alike, as a loop's do: a
// short pattern inside one phase (an optimizer's per-parameter scalars, a
// pair of allocations at each layer's backward) recurs as regularly as an
// iteration, but most of its "iterations" allocate a few bytes and some
// megabytes. More than a tenth of them under a quarter or over four times
// their median is no loop.
bool loop_like(const Lifetimes& lifetimes, const IterationSplit& split) {
  if (split.starts.size() < 3) return !split.starts.empty();
  std::vector<std::int64_t> bytes;
  for (std::size_t k = 1; k < split.starts.size(); ++k) {
    const std::size_t end = k + 1 < split.starts.size() ? split.starts[k + 1] : split.end;
    std::int64_t sum = 0;
    for (std::size_t i = split.starts[k]; i < end; ++i) sum += lifetimes.allocations[i].size;
    bytes.push_back(sum);
  }
  std::vector<std::int64_t> sorted = bytes;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<long>(sorted.size() / 2), sorted.end());
  const std::int64_t median = sorted[sorted.size() / 2];
  std::size_t unlike = 0;
  for (std::int64_t b : bytes) unlike += b * 4 < median || b > median * 4;
  return unlike * 10 <= bytes.size();
}

}  // namespace

IterationSplit find_iterations(const Lifetimes& lifetimes) {
  // The source's own marks, where it has two steps or more: shapes that
  // change from one iteration to the next leave no repeating pattern.
  if (lifetimes.steps_mark_iterations()) return {lifetimes.step_starts, lifetimes.steps_end};
  std::vector<std::uint64_t> keys;
  keys.reserve(lifetimes.allocations.size());
  for (const Allocation& a : lifetimes.allocations) keys.push_back(key_of(a));
  IterationSplit split = find_iterations(keys);
  return loop_like(lifetimes, split) ? split : IterationSplit{};
}

std::vector<ContextBytes> live_by_label(const Trace& trace, const Lifetimes& lifetimes, std::size_t event,
                                        std::size_t top) {
  return by_label(
      trace, lifetimes,
      [event](const Allocation& a) {
        return a.alloc_event <= event && (a.free_event == kNeverFreed || a.free_event > event);
      },
      top);
}

namespace {

// What grows, by label, largest first, up to 10: live at one trough less
// live at an earlier one (what one iteration hands to the next, such as its
// gradients, is there at both). Steady growth: from the second trough (the
// first iteration also sets up what it keeps once) to the last; a step:
// across it. Counted: the allocations of that label made in between that
// are still live.
std::vector<ContextBytes> what_grows(const Trace& trace, const Lifetimes& lifetimes, const IterationReport& r) {
  const bool step = r.shape == "step";
  const std::size_t from = r.trough_events[step ? r.step_iteration : (r.trough_events.size() > 2 ? 1 : 0)];
  const std::size_t to = r.trough_events[step ? r.step_iteration + 1 : r.trough_events.size() - 1];
  const auto all = std::numeric_limits<std::size_t>::max();
  std::unordered_map<std::string, ContextBytes> before, made;
  for (auto& c : live_by_label(trace, lifetimes, from, all)) before[c.label] = c;
  const auto made_between = [&](const Allocation& a) {
    return a.alloc_event > from && a.alloc_event <= to && (a.free_event == kNeverFreed || a.free_event > to);
  };
  for (auto& c : by_label(trace, lifetimes, made_between, all)) made[c.label] = c;
  std::vector<ContextBytes> growing;
  for (auto c : live_by_label(trace, lifetimes, to, all)) {
    if (const auto b = before.find(c.label); b != before.end()) c.bytes -= b->second.bytes;
    const auto m = made.find(c.label);
    c.count = m != made.end() ? m->second.count : 0;
    if (c.bytes > 0) growing.push_back(c);
  }
  std::sort(growing.begin(), growing.end(),
            [](const ContextBytes& a, const ContextBytes& b) { return a.bytes > b.bytes; });
  if (growing.size() > 10) growing.resize(10);
  return growing;
}

}  // namespace

TraceStats trace_stats(const Trace& trace, const Lifetimes& lifetimes) {
  TraceStats s;
  s.format = trace.format;
  s.events = trace.events.size();
  s.device = lifetimes.device;
  s.anomalies = lifetimes.anomalies;
  s.warnings = trace.warnings;
  s.baseline = lifetimes.baseline;
  if (!trace.events.empty()) s.start_time_ns = trace.events.front().time_ns;
  for (const Event& e : trace.events) {
    ++s.actions[action_name(e.action)];
    if (e.device == lifetimes.device && e.total_allocated != kUnknown)
      s.source_peak_allocated = std::max(s.source_peak_allocated, e.total_allocated);
  }
  s.allocations = lifetimes.allocations.size();

  // Walk the events once: +size at an allocation, -size at its free, and the
  // baseline's own frees.
  std::vector<std::int64_t> delta_at(trace.events.size() + 1, 0);
  for (const Allocation& a : lifetimes.allocations) {
    delta_at[a.alloc_event] += a.size;
    if (a.free_event != kNeverFreed) {
      delta_at[a.free_event] -= a.size;
      ++s.frees;
    }
    s.allocated_bytes_total += a.size;
  }
  // The trace's own allocations first (before the baseline's frees join the
  // deltas): replay's peak.
  std::int64_t traced = 0;
  for (std::size_t i = 0; i < trace.events.size(); ++i) {
    traced += delta_at[i];
    if (traced > s.traced_peak) {
      s.traced_peak = traced;
      s.traced_peak_event = i;
    }
  }
  for (auto [event, bytes] : lifetimes.baseline_frees) delta_at[event] -= bytes;
  std::int64_t live = lifetimes.baseline;
  s.peak_allocated = live;
  for (std::size_t i = 0; i < trace.events.size(); ++i) {
    live += delta_at[i];
    if (live > s.peak_allocated) {
      s.peak_allocated = live;
      s.peak_event = i;
      s.peak_time_ns = trace.events[i].time_ns;
    }
  }

  // Largest allocations.
  std::vector<const Allocation*> by_size;
  for (const Allocation& a : lifetimes.allocations) by_size.push_back(&a);
  std::size_t shown = std::min<std::size_t>(by_size.size(), 10);
  std::partial_sort(by_size.begin(), by_size.begin() + static_cast<long>(shown), by_size.end(),
                    [](const Allocation* a, const Allocation* b) {
                      return a->size != b->size ? a->size > b->size : a->alloc_event < b->alloc_event;
                    });
  for (std::size_t i = 0; i < shown; ++i)
    s.largest.push_back({by_size[i]->alloc_event, by_size[i]->size, by_size[i]->free_event != kNeverFreed,
                         context_label(trace, by_size[i]->context)});

  // Never freed, by label.
  for (const Allocation& a : lifetimes.allocations) {
    if (a.free_event != kNeverFreed) continue;
    ++s.never_freed;
    s.never_freed_bytes += a.size;
  }
  s.never_freed_by_context = by_label(
      trace, lifetimes, [](const Allocation& a) { return a.free_event == kNeverFreed; }, 10);

  // Live at the peak.
  if (!trace.events.empty()) {
    s.live_at_peak = live_by_label(trace, lifetimes, s.peak_event, 10);
    s.live_at_peak_baseline = lifetimes.baseline;
    for (auto [event, bytes] : lifetimes.baseline_frees)
      if (event <= s.peak_event) s.live_at_peak_baseline -= bytes;
  }

  // Iterations.
  IterationReport& r = s.iterations;
  const IterationSplit split = find_iterations(lifetimes);
  if (!split.starts.empty()) {
    r.repeats = true;
    r.from_profiler_steps = lifetimes.steps_mark_iterations();
    r.first_allocation = split.starts.front();
    r.iterations = split.starts.size();
    // An allocation index to the event it is (the end: past the last event).
    auto event_at = [&](std::size_t allocation) {
      return allocation < lifetimes.allocations.size() ? lifetimes.allocations[allocation].alloc_event
                                                       : trace.events.size();
    };
    const std::size_t last = split.starts.back();
    r.period = split.end - last;
    r.first_iteration_allocations = (r.iterations > 1 ? split.starts[1] : split.end) - split.starts.front();
    r.period_events = event_at(split.end) - event_at(last);
    for (std::size_t i = last; i < split.end; ++i) r.bytes_per_iteration += lifetimes.allocations[i].size;
    // Each iteration's trough: the least live from just before its first
    // allocation to just before the next iteration's. The last one spans no
    // more events than the one before it: what comes after is the loop's
    // end (its locals freed, the batch and the loss given back), which
    // would put the last trough below the others and hide a leak.
    std::vector<std::int64_t> live_before(trace.events.size() + 1);
    std::int64_t running = lifetimes.baseline;
    for (std::size_t i = 0; i < trace.events.size(); ++i) {
      live_before[i] = running;
      running += delta_at[i];
    }
    live_before[trace.events.size()] = running;
    for (std::size_t k = 0; k < r.iterations; ++k) {
      const std::size_t begin = event_at(split.starts[k]);
      std::size_t end = std::max(begin, event_at(k + 1 < r.iterations ? split.starts[k + 1] : split.end));
      if (k + 1 == r.iterations && k > 0) {
        const std::size_t previous = begin - event_at(split.starts[k - 1]);
        end = std::min(end, begin + previous);
      }
      std::size_t low = begin;
      for (std::size_t e = begin; e <= end && e < live_before.size(); ++e) {
        if (live_before[e] < live_before[low]) low = e;
      }
      r.trough_events.push_back(low);
      r.live_at_trough.push_back(live_before[low]);
    }
  }
  if (r.iterations < 2) r = IterationReport{};  // one iteration shows no growth
  classify(r, r.bytes_per_iteration);
  if (r.shape == "steady growth" || r.shape == "step") r.growing = what_grows(trace, lifetimes, r);
  s.segments = segment_state(trace, lifetimes.device);
  s.ooms = oom_reports(trace, lifetimes);
  return s;
}

}  // namespace gpumem::trace
