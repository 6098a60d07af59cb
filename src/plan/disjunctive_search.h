#pragma once
// The exact search that takes everything a problem can say: gaps and their
// windows, alignment, pinned buffers. Slower than the skyline search, so the
// solver sends it only the time partitions the others cannot take (those
// with gaps). See disjunctive_search.cpp for the method.
#include <cstdint>
#include <utility>
#include <vector>

#include "gpumem/plan/problem.h"
#include "plan/exact_search.h"

namespace gpumem::plan::detail {

// The shifts d = offset(y) - offset(x) at which what x and y occupy would
// meet: open intervals (a, b), sorted and merged; empty when they never share
// a moment.
std::vector<std::pair<int64_t, int64_t>> forbidden_shifts(const Buffer& x, const Buffer& y);
// The same from what each occupies (occupancy()), computed once per buffer.
std::vector<std::pair<int64_t, int64_t>> forbidden_shifts(const std::vector<Occupancy>& x,
                                                          const std::vector<Occupancy>& y);

class DisjunctiveSearch {
 public:
  // `members`: the buffer indices of one time partition (or all of them).
  DisjunctiveSearch(const Problem& problem, const std::vector<int>& members);

  // Looks for offsets of the members with every offset + size <= capacity.
  // On Found, writes them into `offsets` (indexed like problem.buffers).
  SearchStatus find(int64_t capacity, SearchBudget& budget, std::vector<int64_t>& offsets);

 private:
  // Flat, since a partition may hold millions of pairs: each pair's
  // forbidden intervals of offset(y) - offset(x) are intervals_[first, end).
  struct Pair {
    int x, y;  // items, x < y
    size_t first, end;
  };
  struct Edge {
    int to;
    int64_t weight;  // offset(to) >= offset(from) + weight
  };

  // Deeper than this the search gives up (Limit): each level is a stack
  // frame, and that many ordering decisions are far past what it finishes.
  static constexpr int kMaxDepth = 20000;
  static constexpr size_t kMaxSectionEntries = 2'000'000;

  SearchStatus dfs(int depth);
  SearchStatus require(int from, int to, int64_t weight);
  bool sections_can_fit();
  int64_t highest(int item) const { return fixed_[static_cast<size_t>(item)] >= 0 ? fixed_[static_cast<size_t>(item)] : capacity_ - size_[static_cast<size_t>(item)]; }

  std::vector<int> index_;  // item -> buffer index
  std::vector<int64_t> size_, alignment_, fixed_;  // fixed_: -1 when free
  std::vector<Pair> pairs_;
  std::vector<std::pair<int64_t, int64_t>> intervals_;
  bool unit_alignment_ = true;
  // Per time section (a span where the same rectangles are in use): the
  // rectangles there, as (item, begin, end) bytes from the item's offset.
  struct InUse {
    int item;
    int64_t begin, end;
  };
  std::vector<std::vector<InUse>> sections_;
  std::vector<std::pair<int64_t, int64_t>> scratch_;  // (release, deadline) per rectangle
  std::vector<size_t> order_;

  // Search state: the constraints chosen so far and their least solution.
  int64_t capacity_ = 0;
  SearchBudget* budget_ = nullptr;
  std::vector<std::vector<Edge>> out_;  // per item
  std::vector<int64_t> low_;            // per item: the lowest offset the constraints allow
  std::vector<std::pair<int, int64_t>> trail_;  // (item, its low_ before a raise), undone on backtrack
  std::vector<int> queue_, steps_;  // steps_: per item, the edges of the walk that made its value (this call)
  std::vector<char> queued_;
};

}  // namespace gpumem::plan::detail
