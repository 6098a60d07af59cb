// The disjunctive search, in short.
//
// Two buffers x and y collide at a shift d = offset(y) - offset(x) when some
// rectangle of what x occupies (occupancy(): its size, or a gap's window)
// meets one of y's at the same moment; each such meeting rules out an open
// interval of d. So the problem is: choose offsets such that, for every
// pair, d avoids its forbidden intervals, and every offset + size stays
// within the capacity.
//
// Each node of the search holds a set of constraints offset(v) >= offset(u)
// + w and their least solution: every offset as low as the constraints,
// alignment and pinned offsets allow (raising offsets one constraint at a
// time from zero reaches it, as in Bellman-Ford). If that solution collides
// nowhere it is a plan. Else take a colliding pair whose d lies in a
// forbidden interval (a, b): every plan that satisfies the node's
// constraints lies above the least solution and must have d <= a or d >= b,
// so the node branches on exactly those two constraints. Each branch rules
// out the current solution, and a pair's intervals are finitely many, so
// the tree is finite; it misses no plan, so when it is exhausted none fits.
//
// Bound. In each time section the rectangles in use must be disjoint: each
// starts no lower than its release (least offset + begin) and ends no higher
// than its deadline (capacity - size + end). Whatever is released at or
// above r must then fit between r and the latest of their deadlines, and
// whatever is due by d between the earliest of their releases and d: the
// one-machine scheduling bounds, checked at every node.
#include "plan/disjunctive_search.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <tuple>

#include "plan/conflicts.h"

namespace gpumem::plan::detail {

std::vector<std::pair<int64_t, int64_t>> forbidden_shifts(const std::vector<Occupancy>& px,
                                                          const std::vector<Occupancy>& py) {
  std::vector<std::pair<int64_t, int64_t>> raw;
  for_each_meeting(px, py, [&](const Occupancy& p, const Occupancy& q) {
    // p's bytes [ox + p.begin, ox + p.end) meet q's [oy + q.begin, oy + q.end)
    // exactly when p.begin - q.end < d < p.end - q.begin.
    raw.emplace_back(p.begin - q.end, p.end - q.begin);
  });
  std::sort(raw.begin(), raw.end());
  std::vector<std::pair<int64_t, int64_t>> merged;
  for (const auto& [a, b] : raw) {
    // Open intervals of integers: (a1, b1) and (a2, b2) join when a2 < b1.
    if (!merged.empty() && a < merged.back().second) {
      merged.back().second = std::max(merged.back().second, b);
    } else {
      merged.emplace_back(a, b);
    }
  }
  return merged;
}

std::vector<std::pair<int64_t, int64_t>> forbidden_shifts(const Buffer& x, const Buffer& y) {
  if (!x.overlaps_in_time(y)) return {};
  return forbidden_shifts(occupancy(x), occupancy(y));
}

DisjunctiveSearch::DisjunctiveSearch(const Problem& problem, const std::vector<int>& members) {
  const auto& b = problem.buffers;
  for (int i : members) {
    const Buffer& buf = b[static_cast<size_t>(i)];
    index_.push_back(i);
    size_.push_back(buf.size);
    alignment_.push_back(std::max<int64_t>(buf.alignment, 1));
    fixed_.push_back(buf.fixed_offset ? *buf.fixed_offset : -1);
    unit_alignment_ = unit_alignment_ && buf.alignment <= 1;
  }
  const size_t m = index_.size();
  // Sections: between consecutive ends of any member's rectangles.
  std::vector<std::vector<Occupancy>> pieces(m);
  std::vector<int64_t> times;
  for (size_t k = 0; k < m; ++k) {
    pieces[k] = occupancy(b[static_cast<size_t>(index_[k])]);
    for (const Occupancy& o : pieces[k]) {
      times.push_back(o.lower);
      times.push_back(o.upper);
    }
  }
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  sections_.assign(times.empty() ? 0 : times.size() - 1, {});
  // The bound holds one entry per rectangle and section it spans; past
  // kMaxSectionEntries (a huge partition under --solver exact) it is left
  // out rather than take gigabytes.
  size_t entries = 0;
  for (size_t k = 0; k < m; ++k) {
    for (const Occupancy& o : pieces[k]) {
      entries += static_cast<size_t>(std::lower_bound(times.begin(), times.end(), o.upper) -
                                     std::lower_bound(times.begin(), times.end(), o.lower));
    }
  }
  if (entries > kMaxSectionEntries) sections_.clear();
  for (size_t k = 0; k < m && !sections_.empty(); ++k) {
    for (const Occupancy& o : pieces[k]) {
      const auto first = std::lower_bound(times.begin(), times.end(), o.lower) - times.begin();
      const auto end = std::lower_bound(times.begin(), times.end(), o.upper) - times.begin();
      for (auto s = first; s < end; ++s) sections_[static_cast<size_t>(s)].push_back({static_cast<int>(k), o.begin, o.end});
    }
  }
  // One rectangle alone is bounded by its item's own range already.
  std::erase_if(sections_, [](const auto& in_use) { return in_use.size() < 2; });
  // Pairs whose lifetimes meet, from the members' conflict graph (items are
  // the members in order).
  const ConflictGraph graph(member_problem(problem, members));
  for (size_t x = 0; x < m; ++x) {
    for (const int yi : graph.neighbors(x)) {
      const auto y = static_cast<size_t>(yi);
      if (y <= x) continue;
      if (fixed_[x] >= 0 && fixed_[y] >= 0) continue;  // checked before any search
      auto forbidden = forbidden_shifts(pieces[x], pieces[y]);
      // An interval (a, a + 1) holds no integer: no constraint.
      std::erase_if(forbidden, [](const auto& f) { return f.second - f.first <= 1; });
      if (forbidden.empty()) continue;
      pairs_.push_back({static_cast<int>(x), static_cast<int>(y), intervals_.size(), intervals_.size() + forbidden.size()});
      intervals_.insert(intervals_.end(), forbidden.begin(), forbidden.end());
    }
  }
  // Ties among colliding pairs go to the first in this order: keep it by
  // item, not by the sweep's order, which depends on the lifetimes.
  std::sort(pairs_.begin(), pairs_.end(), [](const Pair& p, const Pair& q) { return std::tie(p.x, p.y) < std::tie(q.x, q.y); });
}

// Adds offset(to) >= offset(from) + weight and restores the least solution.
// Infeasible when an offset is pushed past its highest: beyond the capacity,
// or off its pinned value. Each raise comes from a neighbour's current
// value, so the raises that made a value form a walk; `steps_` holds its
// length. Without alignment, a walk of as many edges as there are items
// repeats an item, each raise along it was strict, so the cycle between the
// repeats adds a positive amount: it climbs for ever, and nothing fits. (How
// often a value is raised proves nothing: in one pass an item can be raised
// many times, as its neighbours' values arrive one by one.) With alignment,
// rounding can make a cycle climb a few times and then settle, so there is
// no such cut: the climb ends at the capacity.
SearchStatus DisjunctiveSearch::require(int from, int to, int64_t weight) {
  out_[static_cast<size_t>(from)].push_back({to, weight});
  queue_.clear();
  std::fill(steps_.begin(), steps_.end(), 0);
  std::fill(queued_.begin(), queued_.end(), 0);
  queue_.push_back(from);
  queued_[static_cast<size_t>(from)] = 1;
  uint64_t steps = 0;
  for (size_t head = 0; head < queue_.size(); ++head) {
    const auto u = static_cast<size_t>(queue_[head]);
    queued_[u] = 0;
    for (const Edge& e : out_[u]) {
      const auto v = static_cast<size_t>(e.to);
      const int64_t want = align_up(low_[u] + e.weight, alignment_[v]);
      if (want <= low_[v]) continue;
      if (want > highest(e.to)) return SearchStatus::Infeasible;
      trail_.emplace_back(e.to, low_[v]);
      low_[v] = want;
      steps_[v] = steps_[u] + 1;
      if (unit_alignment_ && steps_[v] >= static_cast<int>(low_.size())) return SearchStatus::Infeasible;
      if (!queued_[v]) {
        queued_[v] = 1;
        queue_.push_back(e.to);
      }
    }
    if ((++steps & 0xffff) == 0 && std::chrono::steady_clock::now() >= budget_->deadline) return SearchStatus::Limit;
    // Keep the queue from growing without bound: drop what was consumed.
    if (head > 4096 && head * 2 > queue_.size()) {
      queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(head) + 1);
      head = static_cast<size_t>(-1);
    }
  }
  return SearchStatus::Found;
}

bool DisjunctiveSearch::sections_can_fit() {
  for (const auto& in_use : sections_) {
    scratch_.clear();
    for (const InUse& u : in_use) {
      const auto k = static_cast<size_t>(u.item);
      scratch_.emplace_back(low_[k] + u.begin, highest(u.item) + u.end);
    }
    auto width = [&](size_t r) {
      const InUse& u = in_use[r];
      return u.end - u.begin;
    };
    std::vector<size_t>& order = order_;
    order.resize(in_use.size());
    for (size_t r = 0; r < order.size(); ++r) order[r] = r;
    // Released at or above r: they fit between r and their latest deadline.
    std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return scratch_[x].first > scratch_[y].first; });
    int64_t total = 0, latest = INT64_MIN;
    for (size_t r : order) {
      total += width(r);
      latest = std::max(latest, scratch_[r].second);
      if (scratch_[r].first + total > latest) return false;
    }
    // Due by d: they fit between their earliest release and d.
    std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return scratch_[x].second < scratch_[y].second; });
    total = 0;
    int64_t earliest = INT64_MAX;
    for (size_t r : order) {
      total += width(r);
      earliest = std::min(earliest, scratch_[r].first);
      if (earliest + total > scratch_[r].second) return false;
    }
  }
  return true;
}

SearchStatus DisjunctiveSearch::dfs(int depth) {
  ++budget_->nodes;
  // A node here costs far more than one of the other searches (the section
  // bounds sort every rectangle): read the clock at each.
  if (budget_->exhausted() || std::chrono::steady_clock::now() >= budget_->deadline) return SearchStatus::Limit;
  // Each level adds one constraint; a path this long means a problem far
  // beyond what this search can finish, and the stack must hold it.
  if (depth > kMaxDepth) return SearchStatus::Limit;
  if (!sections_can_fit()) return SearchStatus::Infeasible;

  // The colliding pair lowest in the arena: plans grow bottom-up.
  const Pair* pick = nullptr;
  std::pair<int64_t, int64_t> interval;
  int64_t pick_low = std::numeric_limits<int64_t>::max();
  for (const Pair& p : pairs_) {
    const int64_t lx = low_[static_cast<size_t>(p.x)], ly = low_[static_cast<size_t>(p.y)];
    const int64_t d = ly - lx;
    // The first interval that ends above d; d collides if it starts below d.
    const auto first = intervals_.begin() + static_cast<std::ptrdiff_t>(p.first);
    const auto end = intervals_.begin() + static_cast<std::ptrdiff_t>(p.end);
    const auto it = std::upper_bound(first, end, d,
                                     [](int64_t value, const auto& f) { return value < f.second; });
    if (it == end || it->first >= d) continue;
    if (std::min(lx, ly) < pick_low) {
      pick = &p;
      interval = *it;
      pick_low = std::min(lx, ly);
    }
  }
  if (!pick) return SearchStatus::Found;

  // y above x (d >= b), or x above y (d <= a): the one that moves the buffer
  // already higher first, which keeps the lower one where it is.
  const int x = pick->x, y = pick->y;
  struct Branch {
    int from, to;
    int64_t weight;
  };
  Branch branches[2] = {{x, y, interval.second}, {y, x, -interval.first}};
  if (low_[static_cast<size_t>(x)] > low_[static_cast<size_t>(y)]) std::swap(branches[0], branches[1]);
  const size_t mark = trail_.size();
  for (const Branch& br : branches) {
    SearchStatus r = require(br.from, br.to, br.weight);
    if (r == SearchStatus::Found) r = dfs(depth + 1);
    if (r == SearchStatus::Found) return r;
    out_[static_cast<size_t>(br.from)].pop_back();
    while (trail_.size() > mark) {
      low_[static_cast<size_t>(trail_.back().first)] = trail_.back().second;
      trail_.pop_back();
    }
    if (r == SearchStatus::Limit) return r;
  }
  return SearchStatus::Infeasible;
}

SearchStatus DisjunctiveSearch::find(int64_t capacity, SearchBudget& budget, std::vector<int64_t>& offsets) {
  capacity_ = capacity;
  budget_ = &budget;
  const size_t m = index_.size();
  out_.assign(m, {});
  low_.assign(m, 0);
  steps_.assign(m, 0);
  queued_.assign(m, 0);
  for (size_t k = 0; k < m; ++k) {
    if (fixed_[k] >= 0) low_[k] = fixed_[k];
    // A pinned buffer that ends past the capacity rules out every plan.
    if (low_[k] > highest(static_cast<int>(k)) || low_[k] + size_[k] > capacity) return SearchStatus::Infeasible;
  }
  trail_.clear();
  const SearchStatus status = dfs(0);
  if (status == SearchStatus::Found) {
    for (size_t k = 0; k < m; ++k) offsets[static_cast<size_t>(index_[k])] = low_[k];
  }
  return status;
}

}  // namespace gpumem::plan::detail
