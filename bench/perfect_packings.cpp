// The planner on instances with a known optimum: perfect packings of 1,000
// to 2,000 buffers (plan/perfect_packing.h: a rectangle cut into pieces, so
// the optimum is its height), solved with a time limit each. Goal: at
// least 9 of 10 proven optimal within 30 s each, in every family.
//
//   build/bench/gpumem_perfect_packings [SECONDS, default 30] [INSTANCES, default 10] [ONLY] [FAMILY] [SEEDS]
//
// ONLY (1 to INSTANCES; 0: all) solves that instance alone, the same one as
// in the full run. FAMILY: issue17 (guillotine, strips and staircase in
// turn, the default), spine, pinwheel or equal-sizes (issue 29's families
// from other generators). SEEDS: tuning (instance i has seed i, the
// default) or test (seed 100 + i): tune the planner on the tuning seeds
// only, and report the test seeds apart.
//
//   build/bench/gpumem_perfect_packings 0 10 0 FAMILY tuning replay
//
// `replay` solves nothing: it walks the skyline search (size ranking,
// fewest-ways focus, flattest first: one of the portfolio's strategies,
// without the tiling filter) along each instance's known packing, pushed down until
// every buffer rests on the ground or on another, and counts where the
// search's own order would have chosen otherwise: the packing's buffer
// not its first pick (and of those, tied with it on flatness), and points
// the packing leaves empty where the search would try buffers first. It
// takes under a second an instance, so an ordering can be judged on it
// before a 30 s run. "reached": the walk got there; "blocked": a candidate
// filter or the slack rule refused the packing's choice; "pruned": a bound
// cut it; "limit": 60 s ran out.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "gpumem/plan/solver.h"
#include "gpumem/plan/validate.h"
#include "plan/skyline_search.h"
#include "support/perfect_packing.h"

namespace {

using namespace gpumem::plan;

void replay(const PerfectPacking& p, int number, std::uint64_t seed) {
  using detail::SkylineSearch;
  std::vector<int> members(p.problem.buffers.size());
  for (std::size_t i = 0; i < members.size(); ++i) members[i] = static_cast<int>(i);
  SkylineSearch search(p.problem, members, detail::RankOrder::Size, detail::Focus::FewestWays);
  SkylineSearch::GuideStats stats;
  search.follow(detail::pushed_down(p.problem, p.offsets), &stats);
  detail::SearchBudget budget;
  budget.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::vector<std::int64_t> offsets(members.size(), -1);
  const detail::SearchStatus status = search.find(p.height, budget, offsets);
  const bool reached = status == detail::SearchStatus::Found;
  std::printf("%-3d %5llu %7zu %8s %7llu %10llu %6llu %7llu %12llu %7llu\n", number,
              static_cast<unsigned long long>(seed), members.size(),
              reached         ? "yes"
              : stats.blocked ? "blocked"
                              : "pruned",
              static_cast<unsigned long long>(budget.nodes), static_cast<unsigned long long>(stats.placements),
              static_cast<unsigned long long>(stats.wrong_first_picks),
              static_cast<unsigned long long>(stats.wrong_first_ties), static_cast<unsigned long long>(stats.closes),
              static_cast<unsigned long long>(stats.closes_where_some_fit));
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gpumem::plan;
  const double seconds = argc > 1 ? std::atof(argv[1]) : 30.0;
  const int instances = argc > 2 ? std::atoi(argv[2]) : 10;
  const int only = argc > 3 ? std::atoi(argv[3]) : 0;
  const char* family = argc > 4 ? argv[4] : "issue17";
  const bool test_seeds = argc > 5 && std::strcmp(argv[5], "test") == 0;
  const bool replaying = argc > 6 && std::strcmp(argv[6], "replay") == 0;
  std::vector<CutShape> shapes;
  if (std::strcmp(family, "issue17") == 0) {
    shapes = {CutShape::kGuillotine, CutShape::kStrips, CutShape::kStaircase};
  } else if (std::strcmp(family, "spine") == 0) {
    shapes = {CutShape::kSpine};
  } else if (std::strcmp(family, "pinwheel") == 0) {
    shapes = {CutShape::kPinwheel};
  } else if (std::strcmp(family, "equal-sizes") == 0) {
    shapes = {CutShape::kEqualSizes};
  } else {
    std::fprintf(stderr, "gpumem_perfect_packings: FAMILY %s: issue17, spine, pinwheel or equal-sizes\n", family);
    return 2;
  }
  if (replaying) {
    std::printf("%-3s %5s %7s %8s %7s %10s %6s %7s %12s %7s\n", "#", "seed", "buffers", "reached", "nodes",
                "placements", "wrong", "tied", "empty points", "of them where some fit");
    for (int i = 0; i < instances; ++i) {
      if (only != 0 && i + 1 != only) continue;
      const CutShape shape = shapes[static_cast<std::size_t>(i) % shapes.size()];
      const std::size_t buffers = 1000 + static_cast<std::size_t>(i) * 1000 / std::max(1, instances - 1);
      const std::uint64_t seed = static_cast<std::uint64_t>(i + 1) + (test_seeds ? 100 : 0);
      replay(perfect_packing(seed, buffers, shape), i + 1, seed);
    }
    return 0;
  }
  int proven = 0;
  std::printf("%-3s %-11s %5s %7s %14s %14s %9s %8s\n", "#", "cut", "seed", "buffers", "optimum", "arena", "proven",
              "seconds");
  for (int i = 0; i < instances; ++i) {
    if (only != 0 && i + 1 != only) continue;
    const CutShape shape = shapes[static_cast<std::size_t>(i) % shapes.size()];
    const std::size_t buffers = 1000 + static_cast<std::size_t>(i) * 1000 / std::max(1, instances - 1);
    const std::uint64_t seed = static_cast<std::uint64_t>(i + 1) + (test_seeds ? 100 : 0);
    const PerfectPacking p = perfect_packing(seed, buffers, shape);
    SolveOptions options;
    options.time_limit_seconds = seconds;
    const auto start = std::chrono::steady_clock::now();
    const SolveResult r = solve(p.problem, options);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const bool ok = r.optimal && r.plan.arena == p.height && !validate(p.problem, r.plan.offsets);
    proven += ok;
    std::printf("%-3d %-11s %5llu %7zu %14lld %14lld %9s %8.2f\n", i + 1, to_string(shape),
                static_cast<unsigned long long>(seed), p.problem.buffers.size(), static_cast<long long>(p.height),
                static_cast<long long>(r.plan.arena), ok ? "yes" : "no", took);
    std::fflush(stdout);
  }
  std::printf("%s, %s seeds: proven optimal %d of %d within %.0f s each (goal: 9 of 10 within 30 s)\n", family,
              test_seeds ? "test" : "tuning", proven, only ? 1 : instances, seconds);
  return 0;
}
