#include "plan/conflicts.h"

#include <algorithm>
#include <numeric>
#include <set>

namespace gpumem::plan::detail {

std::vector<std::vector<int>> conflict_lists(const Problem& problem) {
  const auto& b = problem.buffers;
  const int n = static_cast<int>(b.size());
  std::vector<int> by_lower(static_cast<size_t>(n));
  std::iota(by_lower.begin(), by_lower.end(), 0);
  std::sort(by_lower.begin(), by_lower.end(), [&](int x, int y) {
    return b[static_cast<size_t>(x)].lower != b[static_cast<size_t>(y)].lower
               ? b[static_cast<size_t>(x)].lower < b[static_cast<size_t>(y)].lower
               : x < y;
  });
  std::vector<std::vector<int>> out(static_cast<size_t>(n));
  // Active buffers ordered by the end of their lifetime, to drop the dead.
  std::set<std::pair<int64_t, int>> active;
  for (int i : by_lower) {
    const auto& cur = b[static_cast<size_t>(i)];
    while (!active.empty() && active.begin()->first <= cur.lower) active.erase(active.begin());
    for (const auto& [upper, j] : active) {
      out[static_cast<size_t>(i)].push_back(j);
      out[static_cast<size_t>(j)].push_back(i);
    }
    active.emplace(cur.upper, i);
  }
  for (auto& list : out) std::sort(list.begin(), list.end());
  return out;
}

Sections::Sections(const Problem& problem, const std::vector<int>& members) {
  for (int i : members) {
    times_.push_back(problem.buffers[static_cast<size_t>(i)].lower);
    times_.push_back(problem.buffers[static_cast<size_t>(i)].upper);
  }
  std::sort(times_.begin(), times_.end());
  times_.erase(std::unique(times_.begin(), times_.end()), times_.end());
}

int Sections::of(int64_t t) const {
  return static_cast<int>(std::lower_bound(times_.begin(), times_.end(), t) - times_.begin());
}

std::vector<std::vector<int>> time_partitions(const Problem& problem) {
  const auto& b = problem.buffers;
  std::vector<int> order(b.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int x, int y) {
    return b[static_cast<size_t>(x)].lower != b[static_cast<size_t>(y)].lower
               ? b[static_cast<size_t>(x)].lower < b[static_cast<size_t>(y)].lower
               : x < y;
  });
  std::vector<std::vector<int>> groups;
  int64_t reach = 0;  // the latest end of the current group's lifetimes
  for (int i : order) {
    const auto& cur = b[static_cast<size_t>(i)];
    if (groups.empty() || cur.lower >= reach) {
      groups.emplace_back();
      reach = cur.upper;
    }
    groups.back().push_back(i);
    reach = std::max(reach, cur.upper);
  }
  for (auto& g : groups) std::sort(g.begin(), g.end());
  return groups;
}

}  // namespace gpumem::plan::detail
