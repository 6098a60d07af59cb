// The fallback for inputs with too many conflicting pairs to list: place
// buffers in order of birth, like an allocator would at run time, each in
// the best-fitting free gap. O(n log n) whatever the overlap. Gaps are not
// used: each buffer holds its whole size for its whole lifetime, which is
// stricter than the problem, so the plan stays valid, only larger.
#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "plan/conflicts.h"
#include "plan/heuristic.h"

namespace gpumem::plan::detail {

uint64_t conflicting_pairs(const Problem& problem) {
  // A pair is counted at the later birth: the buffers alive then, i.e. born
  // no later and not yet dead.
  std::vector<int64_t> lowers, uppers;
  for (const auto& b : problem.buffers) {
    lowers.push_back(b.lower);
    uppers.push_back(b.upper);
  }
  std::sort(lowers.begin(), lowers.end());
  std::sort(uppers.begin(), uppers.end());
  uint64_t pairs = 0;
  for (size_t i = 0; i < lowers.size(); ++i) {
    const auto dead = static_cast<uint64_t>(std::upper_bound(uppers.begin(), uppers.end(), lowers[i]) - uppers.begin());
    const uint64_t born_before = i;  // ties: count each pair once by position
    pairs += born_before > dead ? born_before - dead : 0;
  }
  return pairs;
}

Plan sweep_fit_plan(const Problem& problem) {
  const auto& b = problem.buffers;
  const size_t n = b.size();
  Plan plan;
  plan.offsets.assign(n, 0);
  // Pinned buffers keep their offsets; everything else goes above them.
  int64_t base = 0;
  for (const auto& buf : b) {
    if (buf.fixed_offset) base = std::max(base, *buf.fixed_offset + buf.size);
  }
  struct Event {
    int64_t time;
    int kind;  // 0: death (first at equal times), 1: birth
    int buffer;
  };
  std::vector<Event> events;
  for (size_t i = 0; i < n; ++i) {
    if (b[i].fixed_offset) {
      plan.offsets[i] = *b[i].fixed_offset;
      continue;
    }
    events.push_back({b[i].lower, 1, static_cast<int>(i)});
    events.push_back({b[i].upper, 0, static_cast<int>(i)});
  }
  std::sort(events.begin(), events.end(), [](const Event& x, const Event& y) {
    return x.time != y.time ? x.time < y.time : (x.kind != y.kind ? x.kind < y.kind : x.buffer < y.buffer);
  });
  // Free gaps below the high-water mark, by start and by (size, start).
  std::map<int64_t, int64_t> by_start;           // start -> size
  std::set<std::pair<int64_t, int64_t>> by_size;  // (size, start)
  int64_t top = base;
  auto add_gap = [&](int64_t start, int64_t size) {
    // Merge with neighbours so that gaps stay maximal.
    auto next = by_start.lower_bound(start);
    if (next != by_start.end() && next->first == start + size) {
      size += next->second;
      by_size.erase({next->second, next->first});
      next = by_start.erase(next);
    }
    if (next != by_start.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == start) {
        by_size.erase({prev->second, prev->first});
        start = prev->first;
        size += prev->second;
        by_start.erase(prev);
      }
    }
    if (start + size == top) {
      top = start;  // the gap reaches the top: lower the high-water mark
      return;
    }
    by_start[start] = size;
    by_size.insert({size, start});
  };
  for (const Event& e : events) {
    const Buffer& buf = b[static_cast<size_t>(e.buffer)];
    if (e.kind == 0) {
      if (buf.size > 0) add_gap(plan.offsets[static_cast<size_t>(e.buffer)], buf.size);
      continue;
    }
    // Smallest gap that holds the buffer even after aligning its start.
    const int64_t need = buf.size + std::max<int64_t>(buf.alignment, 1) - 1;
    auto it = by_size.lower_bound({need, INT64_MIN});
    if (it != by_size.end()) {
      const auto [size, start] = *it;
      by_size.erase(it);
      by_start.erase(start);
      const int64_t at = align_up(start, buf.alignment);
      plan.offsets[static_cast<size_t>(e.buffer)] = at;
      if (at > start) add_gap(start, at - start);
      if (at + buf.size < start + size) add_gap(at + buf.size, start + size - at - buf.size);
    } else {
      const int64_t at = align_up(top, buf.alignment);
      if (at > top) {
        const int64_t old_top = top;
        top = at;
        add_gap(old_top, at - old_top);
      }
      plan.offsets[static_cast<size_t>(e.buffer)] = at;
      top = at + buf.size;
    }
  }
  plan.arena = arena_size(problem, plan.offsets);
  return plan;
}

}  // namespace gpumem::plan::detail
