#pragma once
// An independent check of any plan: offsets non-negative and aligned, fixed
// offsets kept, and no two buffers that live at the same time share a byte.
#include <optional>
#include <string>

#include "gpumem/plan/problem.h"

namespace gpumem::plan {

struct Violation {
  enum class Kind { Overlap, Misaligned, Negative, FixedMoved, WrongCount } kind;
  int first = -1;   // buffer index
  int second = -1;  // the other buffer of an overlap, else -1
  std::string message;  // names the buffers by id
};

// nullopt when the plan is valid; else the first violation found (for
// overlaps: the pair that collides at the earliest time).
std::optional<Violation> validate(const Problem& problem, const std::vector<int64_t>& offsets);

}  // namespace gpumem::plan
