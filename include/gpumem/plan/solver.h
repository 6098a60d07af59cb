#pragma once
// Planning solvers.
//
//  * Heuristics: greedy best-fit in several orders (size, lifetime, area,
//    conflicts), keeping the best. Milliseconds for ten thousand buffers.
//  * Exact: a complete branch-and-bound over canonical plans (each buffer as
//    low as it can go, placed in order of offset). It proves optimality, or
//    reports the best plan and the remaining gap when its limits run out.
//  * Auto: heuristics, then the exact search only while a gap remains, on
//    time partitions of at most 2,000 buffers.
//  * Exact: the same, on partitions of any size, and with a capacity it
//    keeps minimising after a plan fits (as `minimize` does).
#include <cstdint>
#include <optional>
#include <string>

#include "gpumem/plan/problem.h"

namespace gpumem::plan {

enum class SolverKind { Auto, Heuristic, Exact };

// Why solve() stopped where it did.
enum class StopReason {
  Optimal,        // the plan is proven optimal
  Fits,           // it fits the capacity, and minimising was not asked for
  NoFit,          // proven: no plan fits the capacity (the plan returned is the best found)
  HeuristicOnly,  // SolverKind::Heuristic: no exact search was run
  TimeLimit,      // the time limit ran out first
  NodeLimit,      // the node limit ran out first
  TooLarge,       // auto: a time partition has over 2,000 buffers (SolverKind::Exact takes it)
  TooManyPairs,   // over 50 million conflicting pairs: no exact search can hold them
};

// "optimal", "fits", "no_fit", "heuristic_only", "time_limit", "node_limit",
// "too_large", "too_many_pairs".
const char* to_string(StopReason reason);

struct SolveOptions {
  SolverKind solver = SolverKind::Auto;
  // With a capacity, the search stops at the first plan that fits (the
  // decision problem MiniMalloc solves) unless `minimize` is set; without
  // one it minimises the arena.
  std::optional<int64_t> capacity;
  bool minimize = false;  // keep improving past `capacity` while time allows
  double time_limit_seconds = 10.0;
  uint64_t node_limit = 0;  // 0: no limit
  int threads = 0;          // for the exact search; 0: the hardware's (at most 4)
};

struct SolveResult {
  Plan plan;
  int64_t lower_bound = 0;  // max live bytes
  // The best proven bound on the optimum: lower_bound, raised when the exact
  // search shows that nothing smaller exists.
  int64_t proven_bound = 0;
  bool optimal = false;     // plan.arena == the optimum, proven
  int64_t gap_bytes = 0;    // plan.arena - proven_bound
  std::string solver;       // what produced the plan: "heuristic:<order>", "exact"
  double seconds = 0;
  uint64_t nodes = 0;       // exact-search nodes explored
  int partitions = 0;       // independent time partitions solved separately
  bool limit_reached = false;  // a time, node or size limit stopped the search
  StopReason stopped = StopReason::Optimal;
};

SolveResult solve(const Problem& problem, const SolveOptions& options = {});

// The heuristics alone, each order tried; the best plan and its order name.
struct HeuristicResult {
  Plan plan;
  std::string order;
};
HeuristicResult best_heuristic(const Problem& problem);

}  // namespace gpumem::plan
