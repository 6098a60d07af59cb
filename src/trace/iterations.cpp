// Where a trace's iterations begin, from the allocations alone.
//
// Real training traces do not repeat exactly: the first iteration allocates
// what later ones reuse (gradients, optimizer state) or less than they do,
// one iteration may differ (a checkpoint), ops are reordered, and the trace
// may start or end mid-iteration. So instead of comparing the whole
// sequence with itself shifted, this looks at short runs of allocation keys
// (n-grams): a run that belongs to the iteration occurs once per iteration,
// at regular distances (a multiple of the period where an iteration lacks
// it). The distance most runs agree on is the period, and the earliest run
// that agrees marks where each iteration begins.
#include <algorithm>
#include <unordered_map>

#include "gpumem/trace/trace_stats.h"

namespace gpumem::trace {
namespace {

constexpr std::size_t kMaxRun = 4;         // keys per n-gram
constexpr std::size_t kMaxKeys = 1 << 20;  // the trace's last 1 M allocations are enough

// Within 10% of k times the period, for k from 1 to 4 (up to three
// iterations in a row that lack the run).
bool multiple_of(std::size_t gap, std::size_t period) {
  const std::size_t k = std::max<std::size_t>((gap + period / 2) / period, 1);
  return k <= 4 && gap * 10 >= k * period * 9 && gap * 10 <= k * period * 11;
}

// The distance between iterations that a run's occurrences show, or 0 when
// they are not regular: the median of the gaps after the first, every one
// of them a multiple of it; the first gap (the first iteration) may be up
// to 3x as long, or half as long (a first step that allocates less: a
// recorded encoder's, 172 allocations against 226).
std::size_t gap_of(const std::vector<std::size_t>& at) {
  if (at.size() == 2) return at[1] - at[0];
  std::vector<std::size_t> later;
  for (std::size_t i = 2; i < at.size(); ++i) later.push_back(at[i] - at[i - 1]);
  std::nth_element(later.begin(), later.begin() + static_cast<long>(later.size() / 2), later.end());
  const std::size_t m = later[later.size() / 2];
  for (std::size_t g : later)
    if (!multiple_of(g, m)) return 0;
  const std::size_t first = at[1] - at[0];
  if (first * 2 < m || first > m * 3) return 0;
  return m;
}

// gap_of, for runs whose occurrences span half the trace (n keys): a
// pattern inside one phase (identical layers) repeats regularly there only.
std::size_t regular_gap(const std::vector<std::size_t>& at, std::size_t n) {
  const std::size_t m = gap_of(at);
  return m && (at.back() - at.front() + m) * 2 >= n ? m : 0;
}

struct Run {
  std::size_t period;
  const std::vector<std::size_t>* at;
};

}  // namespace

IterationSplit find_iterations(const std::vector<std::uint64_t>& all_keys) {
  IterationSplit split;
  const std::size_t offset = all_keys.size() > kMaxKeys ? all_keys.size() - kMaxKeys : 0;
  const std::vector<std::uint64_t> keys(all_keys.begin() + static_cast<long>(offset), all_keys.end());
  const std::size_t n = keys.size();
  if (n < 2) return split;
  // Short traces get short runs: two iterations of a 3-allocation loop must
  // still show.
  const std::size_t run = std::clamp<std::size_t>(n / 4, 1, kMaxRun);
  std::unordered_map<std::uint64_t, std::vector<std::size_t>> where;
  where.reserve(n);
  for (std::size_t i = 0; i + run <= n; ++i) {
    std::uint64_t h = 0;
    for (std::size_t j = 0; j < run; ++j) h = (h ^ keys[i + j]) * 0x100000001B3ull + j;
    where[h].push_back(i);
  }
  std::vector<Run> runs;
  for (const auto& [hash, at] : where)
    if (at.size() >= 2)
      if (std::size_t g = regular_gap(at, n)) runs.push_back({g, &at});
  if (runs.empty()) return split;
  // The period: the window of periods within 15% of each other whose runs
  // cover the most positions (two iterations that differ give each run its
  // own distance).
  std::sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) { return a.period < b.period; });
  std::size_t best_begin = 0, best_end = 0, best_cover = 0, cover = 0;
  for (std::size_t b = 0, e = 0; b < runs.size(); cover -= runs[b++].at->size()) {
    for (; e < runs.size() && runs[e].period * 100 <= runs[b].period * 115; ++e) cover += runs[e].at->size();
    if (cover > best_cover) best_begin = b, best_end = e, best_cover = cover;
  }
  const std::size_t period = runs[(best_begin + best_end) / 2].period;
  // The earliest run that agrees marks the starts; an iteration that lacks
  // it gets a start a period on.
  const std::vector<std::size_t>* marks = nullptr;
  for (std::size_t i = best_begin; i < best_end; ++i)
    if (!marks || runs[i].at->front() < marks->front()) marks = runs[i].at;
  std::vector<std::size_t> starts{marks->front()};
  for (std::size_t i = 1; i < marks->size(); ++i) {
    const std::size_t base = starts.back(), gap = (*marks)[i] - base;
    const std::size_t iterations = (gap + period / 2) / period;  // in the gap: more than one when it lacks the run
    for (std::size_t k = 1; k < iterations; ++k) starts.push_back(base + k * gap / iterations);
    starts.push_back((*marks)[i]);
  }
  // Runs near the end cannot complete: iterations past the last mark are
  // counted by the period.
  while (starts.back() + 2 * period <= n) starts.push_back(starts.back() + period);
  // The last iteration is complete when it is nearly as long as the one
  // before, or when runs of the end of the one before recur in it (later
  // iterations may allocate less): had the trace stopped early, those runs
  // would have no counterpart. Any regular run counts: the distances of
  // two iterations that differ may be more than 15% apart.
  bool complete = starts.size() >= 2;
  if (complete) {
    const std::size_t from = starts[starts.size() - 2], to = starts.back();
    std::size_t reached = from;
    for (const Run& r : runs) {
      const std::vector<std::size_t>& at = *r.at;
      for (std::size_t i = 0; i + 1 < at.size(); ++i)
        if (at[i] >= from && at[i] < to && at[i + 1] >= to) reached = std::max(reached, at[i]);
    }
    complete = (n - to) * 10 >= (to - from) * 9 || reached + run + (to - from) / 10 >= to;
  }
  for (std::size_t s : starts) split.starts.push_back(s + offset);
  split.end = all_keys.size();
  if (!complete) {
    split.end = split.starts.back();
    split.starts.pop_back();
  }
  if (split.starts.size() < 2) return IterationSplit{};
  return split;
}

std::size_t find_period(const std::vector<std::uint64_t>& keys) {
  const IterationSplit split = find_iterations(keys);
  return split.starts.empty() ? 0 : split.end - split.starts.back();
}

}  // namespace gpumem::trace
