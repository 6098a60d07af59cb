// The planners on random instances: every plan validates, the exact search
// never loses to the heuristics, equals brute force on tiny instances, and
// packs rectangle cuts to the rectangle's height.
#include <random>

#include <gtest/gtest.h>

#include "gpumem/common/error.h"
#include "gpumem/plan/solver.h"
#include "gpumem/plan/validate.h"
#include "plan/brute_force.h"
#include "plan/conflicts.h"
#include "plan/heuristic.h"
#include "plan/plan_instances.h"
#include "plan/skyline_search.h"

namespace gpumem::plan {
namespace {

SolveOptions exact(double seconds = 5) {
  SolveOptions o;
  o.time_limit_seconds = seconds;
  return o;
}

// The smallest arena over every assignment of offsets, buffers colliding
// when their lifetimes and byte ranges intersect.
int64_t brute_force(const Problem& p) {
  return test::brute_force_arena(p, [](const Buffer& x, int64_t ox, const Buffer& y, int64_t oy) {
    return x.overlaps_in_time(y) && ox < oy + y.size && oy < ox + x.size;
  });
}

// A tiny random instance or rectangle cut, all its buffers as members, and
// its optimum by brute force: what the searches are checked against.
struct SmallInstance {
  Problem problem;
  std::vector<int> members;
  int64_t optimum;
};
SmallInstance small_instance(std::mt19937_64& rng, bool cut) {
  SmallInstance out;
  out.problem = cut ? test::rectangle_cut(rng, 3 + static_cast<int>(rng() % 6), 8, 12)
                    : test::random_problem(rng, 2 + static_cast<int>(rng() % 6), 6, 5);
  for (size_t i = 0; i < out.problem.buffers.size(); ++i) out.members.push_back(static_cast<int>(i));
  out.optimum = brute_force(out.problem);
  return out;
}

TEST(Solver, MiniMallocReadmeExamplePacksAtItsLowerBound) {
  Problem p;
  p.buffers = {{"b1", 0, 3, 4, 1, {}},
               {"b2", 3, 9, 4, 1, {}},
               {"b3", 0, 9, 4, 1, {}},
               {"b4", 9, 21, 4, 1, {}},
               {"b5", 0, 21, 4, 1, {}}};
  const SolveResult r = solve(p, exact());
  EXPECT_EQ(r.lower_bound, 12);
  EXPECT_EQ(r.plan.arena, 12);
  EXPECT_TRUE(r.optimal);
  EXPECT_FALSE(validate(p, r.plan.offsets));
}

TEST(Solver, ExactEqualsBruteForceOnTinyInstances) {
  std::mt19937_64 rng(1);
  int above_bound = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Problem p = test::random_problem(rng, 2 + static_cast<int>(rng() % 5), 6, 4);
    if (trial % 3 == 0) {
      for (auto& b : p.buffers) b.alignment = 1 + static_cast<int64_t>(rng() % 2);  // some need alignment 2
    }
    const SolveResult r = solve(p, exact());
    ASSERT_FALSE(validate(p, r.plan.offsets)) << "trial " << trial;
    ASSERT_TRUE(r.optimal) << "trial " << trial;
    ASSERT_EQ(r.plan.arena, brute_force(p)) << "trial " << trial;
    above_bound += r.plan.arena > r.lower_bound;
  }
  EXPECT_GT(above_bound, 0);  // the set includes instances whose optimum exceeds the lower bound
}

// The floor-tiling filter (SkylineSearch's `tiling`) drops candidates and
// prunes states; it must decide every capacity as the search without it
// does: the same answer, fits or not, on random instances at every capacity
// from the lower bound to the optimum, and on rectangle cuts at their height.
TEST(SkylineSearch, TheFloorTilingFilterDecidesAsTheSearchWithoutIt) {
  std::mt19937_64 rng(7);
  int tight = 0;
  for (int trial = 0; trial < 1500; ++trial) {
    const auto [p, members, optimum] = small_instance(rng, trial % 4 == 0);
    for (int64_t capacity = lower_bound(p); capacity <= optimum; ++capacity) {
      for (const detail::Focus focus :
           {detail::Focus::FewestWays, detail::Focus::TightFirst, detail::Focus::LeastSlack})
        for (const bool mirrored : {false, true}) {
          detail::SearchStatus answer[2];
          for (const bool tiling : {false, true}) {
            detail::SkylineSearch search(p, members, detail::RankOrder::Size, focus, 0, mirrored,
                                         detail::Preference::Flattest, tiling);
            detail::SearchBudget budget;
            budget.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
            std::vector<int64_t> offsets(p.buffers.size(), -1);
            answer[tiling] = search.find(capacity, budget, offsets);
            if (answer[tiling] == detail::SearchStatus::Found) ASSERT_FALSE(validate(p, offsets)) << "trial " << trial;
          }
          ASSERT_EQ(answer[0], answer[1]) << "trial " << trial << ", capacity " << capacity;
          ASSERT_EQ(answer[0] == detail::SearchStatus::Found, capacity == optimum) << "trial " << trial;
        }
      tight += capacity == lower_bound(p);
    }
  }
  EXPECT_GT(tight, 100);
}

// A dive draws its ties at random and skips the release bound (portfolio.cpp);
// left to run to the end it must still decide every capacity exactly: found
// at the optimum (a valid plan), proven impossible below it; and so must a
// systematic search reading the dead states a dive recorded.
TEST(SkylineSearch, ADiveWithoutTheReleaseBoundStillDecidesExactly) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 400; ++trial) {
    const auto [p, members, optimum] = small_instance(rng, trial % 2 == 0);
    for (int64_t capacity = lower_bound(p); capacity <= optimum; ++capacity) {
      // Dives share their table of dead states with the systematic searches
      // (portfolio.cpp): a cut-off dive first fills it, then a dive and a
      // systematic search, each left to finish, must both decide exactly.
      detail::FailedStates failed(12);
      for (int run = 0; run < 3; ++run) {
        const bool dive = run < 2;
        detail::SkylineSearch search(p, members, detail::RankOrder::Area, detail::Focus::FewestWays,
                                     dive ? 1 + static_cast<uint64_t>(trial) : 0, trial % 3 == 0,
                                     dive ? detail::Preference::Drawn : detail::Preference::Flattest);
        search.check_releases(!dive);
        search.share_failures(&failed);
        detail::SearchBudget budget;
        budget.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        if (run == 0) budget.node_limit = 1 + static_cast<uint64_t>(trial) % 8;  // cut off early
        std::vector<int64_t> offsets(p.buffers.size(), -1);
        const detail::SearchStatus answer = search.find(capacity, budget, offsets);
        if (answer == detail::SearchStatus::Found) ASSERT_FALSE(validate(p, offsets)) << "trial " << trial;
        if (answer == detail::SearchStatus::Limit) continue;
        ASSERT_EQ(answer == detail::SearchStatus::Found, capacity == optimum) << "trial " << trial << ", run " << run;
      }
    }
  }
}

// Sections whose live bytes are exactly the given ones, out of those with
// any: what decides whether a search dives, and how long it tries the
// lower bound.
TEST(FullSections, CountsTheSectionsAliveAtExactlyThoseBytes) {
  Problem p;
  for (int64_t t : {0, 1, 2, 6}) {
    Buffer b;
    b.id = std::to_string(t);
    b.lower = t;
    b.upper = t + 2;
    b.size = 4;
    p.buffers.push_back(b);
  }
  // Buffers 0 to 2: sections [0,1) [1,2) [2,3) [3,4) hold 4, 8, 8 and 4 bytes.
  const std::vector<int> first3{0, 1, 2};
  EXPECT_EQ(detail::full_sections(p, first3, 8).full, 2u);
  EXPECT_EQ(detail::full_sections(p, first3, 8).alive, 4u);
  EXPECT_DOUBLE_EQ(detail::full_sections(p, first3, 4).share(), 0.5);
  EXPECT_DOUBLE_EQ(detail::full_sections(p, first3, 12).share(), 0.0);
  // Buffers 0 ([0,2)) and 3 ([6,8)): the section [2,6) between them holds
  // nothing and is not counted.
  const std::vector<int> apart{0, 3};
  EXPECT_EQ(detail::full_sections(p, apart, 4).alive, 2u);
  EXPECT_DOUBLE_EQ(detail::full_sections(p, apart, 4).share(), 1.0);
}

TEST(Solver, ExactNeverLosesToTheHeuristicsAndEveryPlanValidates) {
  std::mt19937_64 rng(2);
  int strictly_better = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const Problem p = test::random_problem(rng, 10 + static_cast<int>(rng() % 30), 40, 64);
    const HeuristicResult h = best_heuristic(p);
    ASSERT_FALSE(validate(p, h.plan.offsets)) << "heuristic, trial " << trial;
    const SolveResult r = solve(p, exact(2));
    ASSERT_FALSE(validate(p, r.plan.offsets)) << "exact, trial " << trial;
    EXPECT_LE(r.plan.arena, h.plan.arena);
    EXPECT_GE(r.plan.arena, r.lower_bound);
    if (r.optimal) EXPECT_EQ(r.gap_bytes, 0);
    strictly_better += r.plan.arena < h.plan.arena;
  }
  EXPECT_GT(strictly_better, 0);
}

TEST(Solver, RectangleCutsPackToTheRectanglesHeight) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t height = 64 + static_cast<int64_t>(rng() % 512);
    const Problem p = test::rectangle_cut(rng, 10 + static_cast<int>(rng() % 120), 1000, height, 1024);
    const SolveResult r = solve(p, exact());
    ASSERT_FALSE(validate(p, r.plan.offsets));
    EXPECT_EQ(r.lower_bound, height * 1024);
    EXPECT_EQ(r.plan.arena, height * 1024) << "trial " << trial << ", " << p.buffers.size() << " buffers";
    EXPECT_TRUE(r.optimal);
  }
}

TEST(Solver, AlignmentAndPinnedBuffersAreRespected) {
  std::mt19937_64 rng(4);
  for (int trial = 0; trial < 100; ++trial) {
    Problem p = test::random_problem(rng, 3 + static_cast<int>(rng() % 10), 20, 40);
    for (auto& b : p.buffers) b.alignment = int64_t{1} << (rng() % 4);
    p.buffers[0].fixed_offset = 8 * static_cast<int64_t>(rng() % 8);
    p.buffers[0].alignment = 8;
    const SolveResult r = solve(p, exact(1));
    ASSERT_FALSE(validate(p, r.plan.offsets)) << "trial " << trial;
    EXPECT_EQ(r.plan.offsets[0], *p.buffers[0].fixed_offset);
    if (p.buffers.size() <= 6) EXPECT_EQ(r.plan.arena, brute_force(p)) << "trial " << trial;
  }
}

TEST(Solver, CollidingPinnedBuffersAreAnError) {
  Problem p;
  p.buffers = {{"a", 0, 10, 8, 1, 0}, {"b", 5, 15, 8, 1, 4}};
  EXPECT_THROW(solve(p), InputError);
}

TEST(Solver, IndependentTimePartitionsAreSolvedApart) {
  Problem p;
  p.buffers = {{"a", 0, 5, 10, 1, {}}, {"b", 2, 6, 20, 1, {}}, {"c", 6, 9, 40, 1, {}}, {"d", 8, 12, 5, 1, {}}};
  EXPECT_EQ(detail::time_partitions(p).size(), 2u);
  const SolveResult r = solve(p);
  EXPECT_EQ(r.partitions, 2);
  EXPECT_EQ(r.plan.arena, 45);
  EXPECT_TRUE(r.optimal);
}

TEST(Solver, CapacityStopsAtTheFirstPlanThatFitsWhenNotMinimising) {
  std::mt19937_64 rng(5);
  const Problem p = test::rectangle_cut(rng, 80, 1000, 256, 1024);
  SolveOptions o = exact();
  o.capacity = 256 * 1024;
  o.minimize = false;
  const SolveResult r = solve(p, o);
  EXPECT_LE(r.plan.arena, *o.capacity);
  EXPECT_FALSE(validate(p, r.plan.offsets));
}

// The default with a capacity: the first plan that fits, with no search
// when the heuristics' plan already does, and the reason said.
TEST(Solver, ByDefaultACapacityIsADecisionNotAMinimisation) {
  for (uint64_t seed = 1; seed < 200; ++seed) {
    std::mt19937_64 rng(seed);
    const Problem p = test::rectangle_cut(rng, 40, 400, 256);
    const int64_t heuristic = best_heuristic(p).plan.arena;
    if (heuristic == 256) continue;  // nothing left to search for
    SolveOptions o = exact();
    o.capacity = heuristic;
    SolveResult r = solve(p, o);
    EXPECT_EQ(r.plan.arena, heuristic);
    EXPECT_EQ(r.stopped, StopReason::Fits);
    EXPECT_EQ(r.nodes, 0u);
    EXPECT_FALSE(r.optimal);
    EXPECT_FALSE(r.limit_reached);
    o.minimize = true;
    r = solve(p, o);
    EXPECT_EQ(r.plan.arena, 256);
    EXPECT_EQ(r.stopped, StopReason::Optimal);
    // `exact` never settles for a plan that merely fits.
    o.minimize = false;
    o.solver = SolverKind::Exact;
    EXPECT_EQ(solve(p, o).plan.arena, 256);
    return;
  }
  FAIL() << "no instance where the heuristics miss the optimum";
}

TEST(AlignUp, RoundsUpNegativeValuesToo) {
  EXPECT_EQ(detail::align_up(-3, 4), 0);
  EXPECT_EQ(detail::align_up(-4, 4), -4);
  EXPECT_EQ(detail::align_up(-5, 4), -4);
  EXPECT_EQ(detail::align_up(5, 4), 8);
  EXPECT_EQ(detail::align_up(8, 4), 8);
  EXPECT_EQ(detail::align_up(7, 1), 7);
}

// A hit in the table of failed states prunes a live search: it must match
// the whole 128-bit key, never one half.
TEST(FailedStates, AHitNeedsBothHalvesOfTheKey) {
  detail::FailedStates failed(4);
  failed.insert({0x1234, 0x5678});
  EXPECT_TRUE(failed.contains({0x1234, 0x5678}));
  EXPECT_FALSE(failed.contains({0x1234, 0x5679}));
  EXPECT_FALSE(failed.contains({0x1235, 0x5678}));
  // Keys that share a slot in both halves' positions do not shadow each other.
  failed.insert({0x1234 + 16, 0x5678 + 16});
  EXPECT_TRUE(failed.contains({0x1234, 0x5678}));
  EXPECT_TRUE(failed.contains({0x1234 + 16, 0x5678 + 16}));
  EXPECT_FALSE(failed.contains({0x1234 + 16, 0x5678}));
}

TEST(Solver, ALimitLeavesAValidPlanAndReportsTheGap) {
  std::mt19937_64 rng(6);
  const Problem p = test::random_problem(rng, 200, 100, 1000);
  SolveOptions o;
  o.node_limit = 50;
  o.threads = 1;
  const SolveResult r = solve(p, o);
  EXPECT_FALSE(validate(p, r.plan.offsets));
  if (!r.optimal) {
    EXPECT_TRUE(r.limit_reached);
    EXPECT_EQ(r.stopped, StopReason::NodeLimit);
    EXPECT_EQ(r.gap_bytes, r.plan.arena - r.proven_bound);
    EXPECT_GT(r.gap_bytes, 0);
  }
}

// A buffer of no lifetime (or no size) collides with nothing; it must not
// make the search believe smaller arenas impossible.
TEST(Solver, EmptyLifetimesAndSizesDoNotFakeAProof) {
  std::mt19937_64 rng(9);
  for (int trial = 0; trial < 100; ++trial) {
    Problem p = test::random_problem(rng, 2 + static_cast<int>(rng() % 6), 15, 8);
    p.buffers.push_back({"empty", 5, 5, 3, 1, {}});
    p.buffers.push_back({"zero", 2, 9, 0, 1, {}});
    const SolveResult r = solve(p, exact(2));
    ASSERT_FALSE(validate(p, r.plan.offsets)) << "trial " << trial;
    ASSERT_TRUE(r.optimal) << "trial " << trial;
    ASSERT_EQ(r.plan.arena, brute_force(p)) << "trial " << trial;
  }
}

TEST(Solver, TheNodeLimitHolds) {
  std::mt19937_64 rng(10);
  for (int trial = 0; trial < 20; ++trial) {
    const Problem p = test::random_problem(rng, 60, 40, 1000);
    SolveOptions o;
    o.node_limit = 10;
    o.time_limit_seconds = 5;
    const SolveResult r = solve(p, o);
    EXPECT_FALSE(validate(p, r.plan.offsets));
    // Each search may finish the 256-node stretch between its checks.
    EXPECT_LE(r.nodes, 10u + 4 * 256) << "trial " << trial;
  }
}

TEST(SweepFit, CountsConflictingPairsExactly) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const Problem p = test::random_problem(rng, 1 + static_cast<int>(rng() % 40), 30, 10);
    uint64_t brute = 0;
    for (size_t i = 0; i < p.buffers.size(); ++i) {
      for (size_t j = i + 1; j < p.buffers.size(); ++j) brute += p.buffers[i].overlaps_in_time(p.buffers[j]);
    }
    ASSERT_EQ(detail::conflicting_pairs(p), brute) << "trial " << trial;
  }
}

TEST(SweepFit, PlansAreValidWithAlignmentAndPinnedBuffers) {
  std::mt19937_64 rng(8);
  for (int trial = 0; trial < 300; ++trial) {
    Problem p = test::random_problem(rng, 1 + static_cast<int>(rng() % 60), 40, 100);
    for (auto& b : p.buffers) b.alignment = int64_t{1} << (rng() % 4);
    if (trial % 3 == 0) {
      p.buffers[0].alignment = 1;
      p.buffers[0].fixed_offset = static_cast<int64_t>(rng() % 64);
    }
    const Plan plan = detail::sweep_fit_plan(p);
    ASSERT_FALSE(validate(p, plan.offsets)) << "trial " << trial;
    EXPECT_GE(plan.arena, lower_bound(p));
  }
}

// 200,000 buffers alive at once would be 2e10 conflicting pairs: the graph
// is never built, and the sweep packs them back to back, optimally.
TEST(SweepFit, TakesOverWhenPairsAreTooManyToList) {
  Problem p;
  for (int i = 0; i < 200000; ++i) p.buffers.push_back({std::to_string(i), 0, 10 + i % 7, 256, 1, {}});
  EXPECT_GT(detail::conflicting_pairs(p), detail::kMaxConflictPairs);
  SolveOptions o;
  o.time_limit_seconds = 1;
  const SolveResult r = solve(p, o);
  EXPECT_EQ(r.solver, "heuristic:sweep/best-fit");
  EXPECT_FALSE(validate(p, r.plan.offsets));
  EXPECT_EQ(r.plan.arena, 200000 * 256);
  EXPECT_TRUE(r.optimal);
}

}  // namespace
}  // namespace gpumem::plan
