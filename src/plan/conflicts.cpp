#include "plan/conflicts.h"

#include <algorithm>
#include <numeric>

namespace gpumem::plan::detail {

ConflictGraph::ConflictGraph(const Problem& problem) : ConflictGraph(problem, {}) {}

ConflictGraph::ConflictGraph(const Problem& problem, const std::vector<int>& order) {
  const auto& b = problem.buffers;
  const size_t n = b.size();
  std::vector<int> by_lower(n);
  std::iota(by_lower.begin(), by_lower.end(), 0);
  std::sort(by_lower.begin(), by_lower.end(), [&](int x, int y) {
    return b[static_cast<size_t>(x)].lower != b[static_cast<size_t>(y)].lower
               ? b[static_cast<size_t>(x)].lower < b[static_cast<size_t>(y)].lower
               : x < y;
  });
  // Sweep in order of start; `active` holds the buffers still alive. Each
  // pair is met once, when the later-starting one arrives. Two sweeps: the
  // first counts degrees, the second fills the arrays in place.
  std::vector<int> active;
  std::vector<int64_t> upper(n);
  for (size_t i = 0; i < n; ++i) upper[i] = b[i].upper;
  auto sweep = [&](auto&& on_pair) {
    active.clear();
    for (int i : by_lower) {
      const int64_t now = b[static_cast<size_t>(i)].lower;
      size_t kept = 0;
      for (int j : active) {
        if (upper[static_cast<size_t>(j)] > now) active[kept++] = j;
      }
      active.resize(kept);
      for (int j : active) on_pair(i, j);
      active.push_back(i);
    }
  };
  // Undirected without an order; else only at the later-placed endpoint.
  std::vector<int> position;
  if (!order.empty()) {
    position.assign(n, 0);
    for (size_t k = 0; k < order.size(); ++k) position[static_cast<size_t>(order[k])] = static_cast<int>(k);
  }
  auto later_first = [&](int i, int j) {
    return position[static_cast<size_t>(i)] > position[static_cast<size_t>(j)] ? std::pair(i, j) : std::pair(j, i);
  };
  starts_.assign(n + 1, 0);
  sweep([&](int i, int j) {
    if (!position.empty()) {
      ++starts_[static_cast<size_t>(later_first(i, j).first) + 1];
      return;
    }
    ++starts_[static_cast<size_t>(i) + 1];
    ++starts_[static_cast<size_t>(j) + 1];
  });
  for (size_t i = 0; i < n; ++i) starts_[i + 1] += starts_[i];
  targets_.resize(starts_[n]);
  std::vector<size_t> fill(starts_.begin(), starts_.end() - 1);
  sweep([&](int i, int j) {
    if (!position.empty()) {
      const auto [later, earlier] = later_first(i, j);
      targets_[fill[static_cast<size_t>(later)]++] = earlier;
      return;
    }
    targets_[fill[static_cast<size_t>(i)]++] = j;
    targets_[fill[static_cast<size_t>(j)]++] = i;
  });
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

FullSections full_sections(const Problem& problem, const std::vector<int>& members, int64_t bytes) {
  const Sections cuts(problem, members);
  std::vector<int64_t> live(cuts.count() + 1, 0);  // differences, then the bytes alive in each section
  for (int i : members) {
    const Buffer& b = problem.buffers[static_cast<size_t>(i)];
    live[static_cast<size_t>(cuts.of(b.lower))] += b.size;
    live[static_cast<size_t>(cuts.of(b.upper))] -= b.size;
  }
  std::partial_sum(live.begin(), live.end(), live.begin());
  live.pop_back();
  FullSections out;
  for (const int64_t v : live) {
    out.alive += v != 0;
    out.full += v != 0 && v == bytes;
  }
  return out;
}

Problem member_problem(const Problem& problem, const std::vector<int>& members) {
  Problem sub;
  sub.buffers.reserve(members.size());
  for (int i : members) sub.buffers.push_back(problem.buffers[static_cast<size_t>(i)]);
  return sub;
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
