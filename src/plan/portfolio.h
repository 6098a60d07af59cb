#pragma once
// Runs several skyline searches that differ in their branching order, with
// restarts under growing node limits, on a few threads, until one finds a
// plan, one completes and so proves there is none, or the deadline passes.
// The exact searches are complete, but their running time depends heavily on
// the order they try things in; a portfolio with restarts cuts that tail.
#include <chrono>
#include <cstdint>
#include <vector>

#include "gpumem/plan/problem.h"
#include "plan/exact_search.h"

namespace gpumem::plan::detail {

struct PortfolioOptions {
  std::chrono::steady_clock::time_point deadline;
  uint64_t node_limit = 0;  // total over all searches; 0: none
  int threads = 0;          // 0: the hardware's, at most 4
};

SearchStatus portfolio_find(const Problem& problem, const std::vector<int>& members, int64_t capacity,
                            const PortfolioOptions& options, std::vector<int64_t>& offsets, uint64_t& nodes);

}  // namespace gpumem::plan::detail
