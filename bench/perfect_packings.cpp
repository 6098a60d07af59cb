// Issue 17's planner goal on instances with a known optimum: ten perfect
// packings of 1,000 to 2,000 buffers (plan/perfect_packing.h: a rectangle
// cut into pieces, so the optimum is its height), solved with a time limit
// each. Goal: at least 9 of 10 proven optimal within 30 s each.
//
//   build/bench/gpumem_perfect_packings [SECONDS per instance, default 30] [INSTANCES, default 10] [ONLY]
//
// ONLY (1 to INSTANCES) solves that instance alone, the same one as in the full run.
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "gpumem/plan/perfect_packing.h"
#include "gpumem/plan/solver.h"
#include "gpumem/plan/validate.h"

int main(int argc, char** argv) {
  using namespace gpumem::plan;
  const double seconds = argc > 1 ? std::atof(argv[1]) : 30.0;
  const int instances = argc > 2 ? std::atoi(argv[2]) : 10;
  const int only = argc > 3 ? std::atoi(argv[3]) : 0;
  const CutShape shapes[] = {CutShape::kGuillotine, CutShape::kStrips, CutShape::kStaircase};
  int proven = 0;
  std::printf("%-3s %-11s %7s %14s %14s %9s %8s\n", "#", "cut", "buffers", "optimum", "arena", "proven", "seconds");
  for (int i = 0; i < instances; ++i) {
    if (only != 0 && i + 1 != only) continue;
    const CutShape shape = shapes[i % 3];
    const std::size_t buffers = 1000 + static_cast<std::size_t>(i) * 1000 / std::max(1, instances - 1);
    const PerfectPacking p = perfect_packing(static_cast<std::uint64_t>(i + 1), buffers, shape);
    SolveOptions options;
    options.time_limit_seconds = seconds;
    const auto start = std::chrono::steady_clock::now();
    const SolveResult r = solve(p.problem, options);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const bool ok = r.optimal && r.plan.arena == p.height && !validate(p.problem, r.plan.offsets);
    proven += ok;
    std::printf("%-3d %-11s %7zu %14lld %14lld %9s %8.2f\n", i + 1, to_string(shape), p.problem.buffers.size(),
                static_cast<long long>(p.height), static_cast<long long>(r.plan.arena), ok ? "yes" : "no", took);
    std::fflush(stdout);
  }
  std::printf("proven optimal: %d of %d within %.0f s each (goal: 9 of 10 within 30 s)\n", proven, instances, seconds);
  return 0;
}
