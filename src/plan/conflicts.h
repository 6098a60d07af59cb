#pragma once
// Which buffers live at the same time, and which groups of buffers never
// share a moment with another group (independent time partitions).
#include <span>
#include <vector>

#include "gpumem/plan/problem.h"

namespace gpumem::plan::detail {

// Which buffers' lifetimes intersect, as adjacency arrays (CSR): built by
// one sweep in O(n log n + conflicts), with two flat arrays instead of a
// vector per buffer, since ten thousand buffers may have millions of pairs.
class ConflictGraph {
 public:
  explicit ConflictGraph(const Problem& problem);
  // Directed: each pair kept only at the buffer placed later by `order`
  // (buffer indices, first placed first). A greedy pass in that order then
  // sees exactly the neighbours already placed, at half the memory.
  ConflictGraph(const Problem& problem, const std::vector<int>& order);
  std::span<const int> neighbors(size_t buffer) const {
    return {targets_.data() + starts_[buffer], targets_.data() + starts_[buffer + 1]};
  }
  size_t size() const { return starts_.empty() ? 0 : starts_.size() - 1; }

 private:
  std::vector<size_t> starts_;  // per buffer, into targets_; one extra at the end
  std::vector<int> targets_;
};

// The members' buffers, in the order of `members`, as a problem of their own.
Problem member_problem(const Problem& problem, const std::vector<int>& members);

// Groups of buffer indices such that no buffer of one group overlaps in time
// with a buffer of another: each group can be planned alone, and the arena is
// the largest of theirs. Groups come in time order; indices ascend.
std::vector<std::vector<int>> time_partitions(const Problem& problem);

// Sections: the spans between consecutive distinct lifetime ends of some
// buffers. Within one, the same buffers are alive throughout.
class Sections {
 public:
  Sections(const Problem& problem, const std::vector<int>& members);
  size_t count() const { return times_.empty() ? 0 : times_.size() - 1; }
  // The index of the section that starts at `t`, which must be a lifetime end
  // of a member; a buffer [lower, upper) covers sections [of(lower), of(upper)).
  int of(int64_t t) const;

 private:
  std::vector<int64_t> times_;
};

// Of the members' sections where some bytes are alive (whole lifetimes:
// gaps are not read), how many hold exactly `bytes`: at a capacity of
// `bytes`, a plan leaves no slack in those.
struct FullSections {
  size_t full = 0, alive = 0;
  double share() const { return alive == 0 ? 0.0 : static_cast<double>(full) / static_cast<double>(alive); }
};
FullSections full_sections(const Problem& problem, const std::vector<int>& members, int64_t bytes);

// The smallest multiple of `alignment` at or above `value` (negative values
// too: align_up(-3, 4) is 0).
inline int64_t align_up(int64_t value, int64_t alignment) {
  if (alignment <= 1) return value;
  int64_t r = value % alignment;
  if (r < 0) r += alignment;
  return r == 0 ? value : value + (alignment - r);
}

}  // namespace gpumem::plan::detail
