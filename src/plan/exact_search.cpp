// The exact search, in short.
//
// Canonical plans. Take any valid plan, sort its buffers by offset and drop
// each, in that order, as low as it can go (to the top of what lies under it
// in its lifetime, or the lowest gap its alignment and the pinned buffers
// allow). Offsets only fall, so the plan stays valid and no larger; repeating
// until nothing moves gives a plan that the same procedure reproduces
// exactly. So it suffices to search plans built by placing buffers in
// non-decreasing offset order, each at its lowest feasible offset: the
// branching is over which buffer comes next. Buffers placed at the same
// offset never conflict, so their order is fixed by a static rank.
//
// Bounds. Every buffer still unplaced will sit at or above the last offset,
// and above the floor of each section (a maximal time span where the set of
// live buffers is constant) it covers. In a section, the unplaced buffers all
// conflict, so they stack: floor (or last, if higher) plus their sizes must
// not exceed the capacity. That one inequality prunes most of the tree: in a
// tight section it forces the next buffer there to sit exactly on the floor.
#include "plan/exact_search.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "plan/conflicts.h"

namespace gpumem::plan::detail {

bool SearchBudget::exhausted() {
  if (node_limit != 0 && nodes >= node_limit) return true;
  // The clock is read every 16 nodes. A node is microseconds on small
  // instances, but on a thousand long-lived buffers over thousands of time
  // sections one takes ~20 ms: reading every 256 nodes let a 1 s limit run
  // 10 s. Reading the clock costs ~25 ns, under 0.2% of the cheapest node's
  // time when shared by 16.
  if ((nodes & 15) != 0) return false;
  return std::chrono::steady_clock::now() >= deadline || (stop && stop->load(std::memory_order_relaxed));
}

ExactSearch::ExactSearch(const Problem& problem, const std::vector<int>& members) {
  const auto& b = problem.buffers;
  const Sections sections_of(problem, members);
  auto section_of = [&](int64_t t) { return sections_of.of(t); };
  const size_t sections = sections_of.count();
  floor_.assign(sections, 0);
  remaining_.assign(sections, 0);

  // Rank: larger and longer-lived buffers first among equal offsets; they
  // are the hardest to fit later.
  std::vector<int> order(members);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
    const auto& bx = b[static_cast<size_t>(x)];
    const auto& by = b[static_cast<size_t>(y)];
    if (bx.size != by.size) return bx.size > by.size;
    return (bx.upper - bx.lower) > (by.upper - by.lower);
  });
  std::map<int, int> rank_of;
  for (size_t r = 0; r < order.size(); ++r) rank_of[order[r]] = static_cast<int>(r);

  std::map<int, int> item_of;
  for (int i : members) {
    const auto& buf = b[static_cast<size_t>(i)];
    Item it{i, buf.size, std::max<int64_t>(buf.alignment, 1), section_of(buf.lower), section_of(buf.upper),
            rank_of[i]};
    item_of[i] = static_cast<int>(items_.size());
    items_.push_back(it);
    fixed_offsets_.push_back(buf.fixed_offset ? *buf.fixed_offset : -1);
  }
  const size_t m = items_.size();
  conflicts_.assign(m, {});
  obstacles_.assign(m, {});
  // Items are the members in order: the members' conflict graph lists the
  // pairs in O(n log n + pairs), where a double loop would take n^2.
  const ConflictGraph graph(member_problem(problem, members));
  for (size_t x = 0; x < m; ++x) {
    for (const int yi : graph.neighbors(x)) {
      const auto y = static_cast<size_t>(yi);
      if (y <= x) continue;
      const auto& bx = b[static_cast<size_t>(items_[x].index)];
      const auto& by = b[static_cast<size_t>(items_[y].index)];
      const bool fx = fixed_offsets_[x] >= 0, fy = fixed_offsets_[y] >= 0;
      if (!fx && !fy) {
        conflicts_[x].push_back(static_cast<int>(y));
        conflicts_[y].push_back(static_cast<int>(x));
      } else if (fx && !fy) {
        obstacles_[y].push_back({fixed_offsets_[x], fixed_offsets_[x] + bx.size});
      } else if (fy && !fx) {
        obstacles_[x].push_back({fixed_offsets_[y], fixed_offsets_[y] + by.size});
      }
    }
  }
  for (auto& obs : obstacles_) {
    std::sort(obs.begin(), obs.end(), [](const Obstacle& p, const Obstacle& q) { return p.begin < q.begin; });
  }
  for (size_t x = 0; x < m; ++x) {
    if (fixed_offsets_[x] >= 0) fixed_arena_ = std::max(fixed_arena_, fixed_offsets_[x] + items_[x].size);
  }
}

int64_t ExactSearch::position(int item) const {
  const Item& it = items_[static_cast<size_t>(item)];
  int64_t at = align_up(floor_max_[static_cast<size_t>(item)], it.alignment);
  for (const Obstacle& o : obstacles_[static_cast<size_t>(item)]) {
    if (at + it.size <= o.begin) break;
    if (at < o.end) at = align_up(o.end, it.alignment);
  }
  return at;
}

void ExactSearch::place(int item, int64_t offset) {
  const Item& it = items_[static_cast<size_t>(item)];
  offset_[static_cast<size_t>(item)] = offset;
  const int64_t top = offset + it.size;
  for (int s = it.first_section; s < it.end_section; ++s) {
    trail_.emplace_back(-1 - s, floor_[static_cast<size_t>(s)]);
    floor_[static_cast<size_t>(s)] = top;
    remaining_[static_cast<size_t>(s)] -= it.size;
  }
  for (int c : conflicts_[static_cast<size_t>(item)]) {
    auto& fm = floor_max_[static_cast<size_t>(c)];
    if (offset_[static_cast<size_t>(c)] < 0 && fm < top) {
      trail_.emplace_back(c, fm);
      fm = top;
    }
  }
  last_ = offset;
  last_rank_ = it.rank;
  --unplaced_;
}

void ExactSearch::unplace(int item, size_t trail_mark, int64_t saved_last, int saved_last_rank) {
  const Item& it = items_[static_cast<size_t>(item)];
  while (trail_.size() > trail_mark) {
    const auto [who, old] = trail_.back();
    trail_.pop_back();
    if (who < 0) {
      floor_[static_cast<size_t>(-1 - who)] = old;
    } else {
      floor_max_[static_cast<size_t>(who)] = old;
    }
  }
  for (int s = it.first_section; s < it.end_section; ++s) remaining_[static_cast<size_t>(s)] += it.size;
  offset_[static_cast<size_t>(item)] = -1;
  last_ = saved_last;
  last_rank_ = saved_last_rank;
  ++unplaced_;
}

SearchStatus ExactSearch::dfs(int depth) {
  ++budget_->nodes;
  if (budget_->exhausted()) return SearchStatus::Limit;
  if (unplaced_ == 0) return SearchStatus::Found;

  // The highest offset the next placement may take: above it, some section's
  // unplaced buffers could no longer stack under the capacity.
  int64_t max_next = capacity_;
  for (size_t s = 0; s < floor_.size(); ++s) {
    const int64_t rem = remaining_[s];
    if (rem == 0) continue;
    if (std::max(floor_[s], last_) + rem > capacity_) return SearchStatus::Infeasible;
    max_next = std::min(max_next, capacity_ - rem);
  }

  auto& cands = candidates_[static_cast<size_t>(depth)];
  cands.clear();
  std::fill(lowest_start_.begin(), lowest_start_.end(), capacity_ + 1);
  for (size_t i = 0; i < items_.size(); ++i) {
    if (offset_[i] >= 0) continue;
    const int item = static_cast<int>(i);
    const int64_t at = position(item);
    const Item& it = items_[i];
    // The lowest offset this buffer can still take: later placements are at
    // or above last_, and at last_ only in rank order.
    const int64_t earliest = at > last_ || (at == last_ && it.rank > last_rank_) ? at : last_ + 1;
    if (earliest + it.size > capacity_) return SearchStatus::Infeasible;  // can never fit
    for (int s = it.first_section; s < it.end_section; ++s) {
      auto& low = lowest_start_[static_cast<size_t>(s)];
      low = std::min(low, earliest);
    }
    if (at < last_ || at > max_next) continue;
    if (at == last_ && it.rank < last_rank_) continue;  // that order was tried already
    cands.push_back({at, item});
  }
  // In each section, whatever is placed next starts no lower than the lowest
  // start any of its buffers can still take; the rest stacks above it.
  for (size_t s = 0; s < floor_.size(); ++s) {
    if (remaining_[s] != 0 && lowest_start_[s] + remaining_[s] > capacity_) return SearchStatus::Infeasible;
  }
  std::sort(cands.begin(), cands.end(), [&](const Candidate& x, const Candidate& y) {
    return x.offset != y.offset ? x.offset < y.offset
                                : items_[static_cast<size_t>(x.item)].rank < items_[static_cast<size_t>(y.item)].rank;
  });

  for (size_t k = 0; k < cands.size(); ++k) {
    const Candidate c = cands[k];
    const size_t mark = trail_.size();
    const int64_t saved_last = last_;
    const int saved_rank = last_rank_;
    place(c.item, c.offset);
    const SearchStatus r = dfs(depth + 1);
    if (r == SearchStatus::Found) return r;
    unplace(c.item, mark, saved_last, saved_rank);
    if (r == SearchStatus::Limit) return r;
  }
  return SearchStatus::Infeasible;
}

SearchStatus ExactSearch::find(int64_t capacity, SearchBudget& budget, std::vector<int64_t>& offsets) {
  if (fixed_arena_ > capacity) return SearchStatus::Infeasible;
  capacity_ = capacity;
  budget_ = &budget;
  const size_t m = items_.size();
  std::fill(floor_.begin(), floor_.end(), 0);
  std::fill(remaining_.begin(), remaining_.end(), 0);
  lowest_start_.assign(floor_.size(), 0);
  floor_max_.assign(m, 0);
  offset_.assign(m, -1);
  trail_.clear();
  candidates_.assign(m + 1, {});
  last_ = 0;
  last_rank_ = -1;
  unplaced_ = 0;
  for (size_t i = 0; i < m; ++i) {
    if (fixed_offsets_[i] >= 0) {
      offset_[i] = fixed_offsets_[i];  // obstacles, not part of the floor
      continue;
    }
    ++unplaced_;
    for (int s = items_[i].first_section; s < items_[i].end_section; ++s) {
      remaining_[static_cast<size_t>(s)] += items_[i].size;
    }
  }
  const SearchStatus status = dfs(0);
  if (status == SearchStatus::Found) {
    for (size_t i = 0; i < m; ++i) offsets[static_cast<size_t>(items_[i].index)] = offset_[i];
  }
  return status;
}

}  // namespace gpumem::plan::detail
