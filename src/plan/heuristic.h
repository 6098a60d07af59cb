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

// Size-descending, lifetime-descending, area-descending and
// conflict-bytes-descending orders; the first `count` of them.
std::vector<NamedOrder> heuristic_orders(const Problem& problem, const ConflictGraph& conflicts, size_t count = 4);

// Above this many buffers only size-descending best-fit runs.
inline constexpr size_t kAllVariantsUpTo = 2048;

Plan greedy_plan(const Problem& problem, const std::vector<int>& order, const ConflictGraph& conflicts,
                 GapRule rule);

HeuristicResult best_heuristic(const Problem& problem, const ConflictGraph& conflicts);

}  // namespace gpumem::plan::detail
