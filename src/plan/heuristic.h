#pragma once
// The greedy heuristics' building blocks, shared by solve() and the tests.
#include <string>
#include <vector>

#include "gpumem/plan/solver.h"
#include "plan/conflicts.h"

namespace gpumem::plan::detail {

enum class GapRule {
  BestFit,   // the smallest gap that fits (TFLite's arena planner)
  FirstFit,  // the lowest gap that fits
};

struct NamedOrder {
  std::string name;
  std::vector<int> order;  // buffer indices, placed first to last
};

// Size-descending (ties: longer lifetime first).
std::vector<int> size_order(const Problem& problem);

// Size-, lifetime-, area- and conflict-bytes-descending orders.
std::vector<NamedOrder> heuristic_orders(const Problem& problem, const ConflictGraph& conflicts);

// Above this many buffers only size-descending best-fit runs.
inline constexpr size_t kAllVariantsUpTo = 2048;

Plan greedy_plan(const Problem& problem, const std::vector<int>& order, const ConflictGraph& conflicts,
                 GapRule rule);

// Beyond this many conflicting pairs the conflict graph is not built (it
// would take gigabytes): sweep_fit_plan() places the buffers instead.
inline constexpr uint64_t kMaxConflictPairs = 50'000'000;

// How many pairs of buffers overlap in time, in O(n log n).
uint64_t conflicting_pairs(const Problem& problem);

// Buffers placed in order of birth, each in the best-fitting free gap, gaps
// merged at deaths: what a best-fit allocator would do at run time.
Plan sweep_fit_plan(const Problem& problem);

// All variants, keeping the best; over kAllVariantsUpTo buffers (and none
// pinned) size-descending best-fit alone.
HeuristicResult best_heuristic(const Problem& problem);

}  // namespace gpumem::plan::detail
