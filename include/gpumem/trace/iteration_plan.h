#pragma once
// A recorded trace's steady iteration as a plan for planned mode
// (gpumem/alloc/planned_allocator.h): `gpumem trace plan` writes it, and a
// job loads it before its first iteration (use_plan(), gpumem_use_plan_file)
// so that even that iteration comes from the arena.
#include "gpumem/alloc/planned_allocator.h"
#include "gpumem/trace/lifetimes.h"

namespace gpumem::trace {

struct TracePlan {
  alloc::IterationPlan plan;
  std::size_t iteration = 0;         // which complete iteration (0-based) was planned
  std::size_t iterations = 0;        // complete iterations found
  std::size_t planned_requests = 0;  // requests with an offset (freed within the iteration)
};

// The last complete iteration's requests, in order, planned with
// `solve_seconds`: a request freed within the iteration gets an offset, one
// that outlives it -1. Throws InputError naming `source` when the trace
// does not repeat.
TracePlan plan_last_iteration(const Lifetimes& lifetimes, const std::string& source, double solve_seconds);

}  // namespace gpumem::trace
