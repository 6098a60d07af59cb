// Greedy placement in a given order: each buffer takes the best gap among the
// buffers already placed that live at the same time (TFLite's and XLA's
// "greedy by size" family), or goes on top of them.
#include <algorithm>
#include <limits>
#include <numeric>

#include "gpumem/plan/solver.h"
#include "plan/conflicts.h"
#include "plan/heuristic.h"

namespace gpumem::plan {
namespace detail {

Plan greedy_plan(const Problem& problem, const std::vector<int>& order, const ConflictGraph& conflicts,
                 GapRule rule) {
  const auto& b = problem.buffers;
  const size_t n = b.size();
  // Sizes and offsets in flat arrays: the inner loop walks millions of
  // neighbours and must not drag whole Buffer records through the cache.
  std::vector<int64_t> size(n), offset(n, -1);
  for (size_t i = 0; i < n; ++i) size[i] = b[i].size;
  // Buffers with gaps occupy several rectangles; the others one, handled
  // inline. The conflict graph joins lifetimes, so with gaps a neighbour
  // may turn out to share no moment at all.
  const bool gapped = problem.has_gaps();
  std::vector<std::vector<Occupancy>> pieces(gapped ? n : 0);
  if (gapped) {
    for (size_t i = 0; i < n; ++i) pieces[i] = occupancy(b[i]);
  }
  // Pinned buffers first: everything else fits around them.
  for (size_t i = 0; i < n; ++i) {
    if (b[i].fixed_offset) offset[i] = *b[i].fixed_offset;
  }
  // Offsets the buffer being placed must not take, as half-open ranges
  // [first, end): a placed neighbour at y with `size_j` bytes forbids
  // [y - size_i + 1, y + size_j). In gaps, each pair of rectangles that
  // share a moment forbids its own range.
  std::vector<std::pair<int64_t, int64_t>> forbidden;
  for (int idx : order) {
    const auto i = static_cast<size_t>(idx);
    if (offset[i] >= 0) continue;
    const int64_t alignment = b[i].alignment;
    forbidden.clear();
    for (int jdx : conflicts.neighbors(i)) {
      const auto j = static_cast<size_t>(jdx);
      const int64_t at = offset[j];
      if (at < 0) continue;
      if (!gapped || (b[i].gaps.empty() && b[j].gaps.empty())) {
        forbidden.emplace_back(at - size[i] + 1, at + size[j]);
        continue;
      }
      for_each_meeting(pieces[i], pieces[j], [&](const Occupancy& p, const Occupancy& q) {
        forbidden.emplace_back(at + q.begin - p.end + 1, at + q.end - p.begin);
      });
    }
    // By start alone: the scan below keeps the furthest end seen.
    std::sort(forbidden.begin(), forbidden.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    int64_t best = -1;
    int64_t best_gap = std::numeric_limits<int64_t>::max();
    int64_t cursor = 0;  // the lowest offset not yet ruled out
    for (const auto& [first, end] : forbidden) {
      const int64_t at = align_up(cursor, alignment);
      if (at < first) {
        // The free space around offsets [cursor, first) is first - cursor
        // bytes more than the buffer: best fit takes the tightest.
        const int64_t gap = first - cursor;
        if (rule == GapRule::FirstFit) {
          best = at;
          break;
        }
        if (gap < best_gap) {
          best_gap = gap;
          best = at;
        }
      }
      cursor = std::max(cursor, end);
    }
    if (best < 0) best = align_up(cursor, alignment);
    offset[i] = best;
  }
  Plan plan;
  plan.offsets = std::move(offset);
  plan.arena = arena_size(problem, plan.offsets);
  return plan;
}

std::vector<int> size_order(const Problem& problem) {
  const auto& b = problem.buffers;
  std::vector<int> order(b.size());
  std::iota(order.begin(), order.end(), 0);
  // A full tie-break (index last) makes the plain sort deterministic.
  std::sort(order.begin(), order.end(), [&](int x, int y) {
    const auto& bx = b[static_cast<size_t>(x)];
    const auto& by = b[static_cast<size_t>(y)];
    if (bx.size != by.size) return bx.size > by.size;
    if (bx.upper - bx.lower != by.upper - by.lower) return bx.upper - bx.lower > by.upper - by.lower;
    return x < y;
  });
  return order;
}

std::vector<NamedOrder> heuristic_orders(const Problem& problem, const ConflictGraph& conflicts) {
  const auto& b = problem.buffers;
  const size_t n = b.size();
  auto life = [&](size_t i) { return b[i].upper - b[i].lower; };
  auto sorted = [&](auto key_greater) {
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
      return key_greater(static_cast<size_t>(x), static_cast<size_t>(y));
    });
    return order;
  };
  std::vector<NamedOrder> orders;
  orders.push_back({"size", size_order(problem)});
  orders.push_back({"lifetime", sorted([&](size_t x, size_t y) {
                      return life(x) != life(y) ? life(x) > life(y) : b[x].size > b[y].size;
                    })});
  orders.push_back({"area", sorted([&](size_t x, size_t y) {
                      const double ax = static_cast<double>(b[x].size) * static_cast<double>(life(x));
                      const double ay = static_cast<double>(b[y].size) * static_cast<double>(life(y));
                      return ax != ay ? ax > ay : b[x].size > b[y].size;
                    })});
  std::vector<int64_t> conflict_bytes(n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (int j : conflicts.neighbors(i)) conflict_bytes[i] += b[static_cast<size_t>(j)].size;
  }
  orders.push_back({"conflicts", sorted([&](size_t x, size_t y) {
                      return conflict_bytes[x] + b[x].size != conflict_bytes[y] + b[y].size
                                 ? conflict_bytes[x] + b[x].size > conflict_bytes[y] + b[y].size
                                 : b[x].size > b[y].size;
                    })});
  return orders;
}

HeuristicResult best_heuristic(const Problem& problem) {
  // Every variant costs a pass over all conflicting pairs. On large inputs
  // run only the one that wins most often on real graphs (size-descending
  // best-fit, TFLite's), over a directed graph that holds just the pairs it
  // needs; the exact search refines it where a gap remains.
  if (conflicting_pairs(problem) > kMaxConflictPairs) return {sweep_fit_plan(problem), "sweep/best-fit"};
  const bool pinned = std::any_of(problem.buffers.begin(), problem.buffers.end(),
                                  [](const Buffer& b) { return b.fixed_offset.has_value(); });
  if (problem.buffers.size() > kAllVariantsUpTo && !pinned) {
    const std::vector<int> order = size_order(problem);
    const ConflictGraph earlier(problem, order);
    return {greedy_plan(problem, order, earlier, GapRule::BestFit), "size/best-fit"};
  }
  const ConflictGraph conflicts(problem);
  HeuristicResult best;
  bool have = false;
  for (const auto& order : heuristic_orders(problem, conflicts)) {
    for (GapRule rule : {GapRule::BestFit, GapRule::FirstFit}) {
      Plan p = greedy_plan(problem, order.order, conflicts, rule);
      if (!have || p.arena < best.plan.arena) {
        best.plan = std::move(p);
        best.order = order.name + (rule == GapRule::BestFit ? "/best-fit" : "/first-fit");
        have = true;
      }
    }
  }
  if (!have) best.order = "none";
  return best;
}

}  // namespace detail

HeuristicResult best_heuristic(const Problem& problem) { return detail::best_heuristic(problem); }

}  // namespace gpumem::plan
