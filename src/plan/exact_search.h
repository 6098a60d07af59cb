#pragma once
// Complete branch-and-bound search for a plan of one time partition within a
// capacity. See exact_search.cpp for the method.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "gpumem/plan/problem.h"

namespace gpumem::plan::detail {

enum class SearchStatus {
  Found,       // a plan within the capacity
  Infeasible,  // proven: no plan within the capacity exists
  Limit,       // time or node limit reached first
};

struct SearchBudget {
  std::chrono::steady_clock::time_point deadline;
  uint64_t node_limit = 0;  // 0: none
  uint64_t nodes = 0;       // explored so far, across searches
  // Set by another search of a portfolio once it has an answer.
  const std::atomic<bool>* stop = nullptr;

  bool exhausted();
};

class ExactSearch {
 public:
  // `members`: the buffer indices of one time partition (or all of them),
  // none with gaps (DisjunctiveSearch takes those).
  ExactSearch(const Problem& problem, const std::vector<int>& members);

  // Looks for offsets of the members with every offset + size <= capacity.
  // On Found, writes them into `offsets` (indexed like problem.buffers).
  SearchStatus find(int64_t capacity, SearchBudget& budget, std::vector<int64_t>& offsets);

 private:
  struct Item {
    int index;  // in problem.buffers
    int64_t size;
    int64_t alignment;
    int first_section, end_section;  // sections [first, end)
    int rank;                        // static priority: 0 is tried first among equals
  };
  struct Obstacle {
    int64_t begin, end;
  };
  struct Candidate {
    int64_t offset;
    int item;
  };

  SearchStatus dfs(int depth);
  int64_t position(int item) const;  // lowest feasible offset on the current floor
  void place(int item, int64_t offset);
  void unplace(int item, size_t trail_mark, int64_t saved_last, int saved_last_rank);

  std::vector<Item> items_;
  std::vector<std::vector<int>> conflicts_;       // item -> unfixed conflicting items
  std::vector<std::vector<Obstacle>> obstacles_;  // item -> fixed buffers in its time, by offset
  std::vector<int64_t> fixed_offsets_;            // per item, -1 if free
  int64_t fixed_arena_ = 0;

  // Search state.
  int64_t capacity_ = 0;
  SearchBudget* budget_ = nullptr;
  std::vector<int64_t> floor_;     // per section: top of what is placed there
  std::vector<int64_t> remaining_; // per section: bytes of unplaced items alive there
  std::vector<int64_t> floor_max_; // per item: max floor over its sections
  std::vector<int64_t> lowest_start_;  // per section, scratch: lowest start of its unplaced buffers
  std::vector<int64_t> offset_;    // per item, -1 while unplaced
  std::vector<std::pair<int, int64_t>> trail_;  // (item, old floor_max) / (-1-section, old floor)
  std::vector<std::vector<Candidate>> candidates_;  // per depth, reused
  int64_t last_ = 0;     // offset of the most recent placement: later ones are >= it
  int last_rank_ = -1;   // its rank, to order placements at equal offsets
  int unplaced_ = 0;
};

}  // namespace gpumem::plan::detail
