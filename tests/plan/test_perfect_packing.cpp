// Perfect packings: the cut is a valid plan of exactly the rectangle's
// height, which is also the lower bound, so the optimum is known; the same
// seed gives the same instance; small ones are proven by the solver.
#include "support/perfect_packing.h"

#include <gtest/gtest.h>

#include <chrono>

#include "gpumem/plan/solver.h"
#include "gpumem/plan/validate.h"
#include "plan/skyline_search.h"

namespace gpumem::plan {
namespace {

TEST(PerfectPacking, TheCutIsAPlanAsHighAsTheLowerBound) {
  for (CutShape shape : {CutShape::kGuillotine, CutShape::kStrips, CutShape::kStaircase}) {
    for (std::size_t n : {1u, 7u, 200u, 2000u}) {
      const PerfectPacking p = perfect_packing(n, n, shape);
      ASSERT_EQ(p.problem.buffers.size(), n) << to_string(shape);
      EXPECT_FALSE(validate(p.problem, p.offsets).has_value()) << to_string(shape) << " " << n;
      EXPECT_EQ(arena_size(p.problem, p.offsets), p.height) << to_string(shape) << " " << n;
      EXPECT_EQ(lower_bound(p.problem), p.height) << "the pieces tile the rectangle: " << to_string(shape);
      for (const Buffer& b : p.problem.buffers) {
        EXPECT_EQ(b.size % 512, 0);
        EXPECT_LT(b.lower, b.upper);
      }
    }
  }
}

// The families from other generators (issue 29): still plans as high as
// the bound. The spine's sizes are 64-byte units, its times steps of 1,024
// or 256, and a tenth to a fifth of its pieces are gone; a pinwheel has
// pieces no straight cut separates; equal-sizes has one size.
TEST(PerfectPacking, OtherFamiliesAreStillPerfect) {
  for (CutShape shape : {CutShape::kSpine, CutShape::kPinwheel, CutShape::kEqualSizes}) {
    for (std::uint64_t seed : {1u, 2u, 3u}) {
      for (std::size_t n : {1u, 9u, 300u, 2000u}) {
        const PerfectPacking p = perfect_packing(seed, n, shape);
        const std::string where =
            std::string(to_string(shape)) + " seed " + std::to_string(seed) + " n " + std::to_string(n);
        ASSERT_FALSE(p.problem.buffers.empty()) << where;
        EXPECT_FALSE(validate(p.problem, p.offsets).has_value()) << where;
        EXPECT_EQ(arena_size(p.problem, p.offsets), p.height) << where;
        EXPECT_EQ(lower_bound(p.problem), p.height) << where;
        if (shape == CutShape::kSpine) {
          EXPECT_GE(p.problem.buffers.size() * 10, n * 8) << where;
          EXPECT_LE(p.problem.buffers.size() * 10, n * 12 + 10) << where;
          std::int64_t step = 1024;
          for (const Buffer& b : p.problem.buffers) {
            EXPECT_EQ(b.size % 64, 0) << where;
            if (b.lower % 1024 != 0 || b.upper % 1024 != 0) step = 256;
          }
          for (const Buffer& b : p.problem.buffers) EXPECT_EQ(b.lower % step + b.upper % step, 0) << where;
        } else {
          EXPECT_EQ(p.problem.buffers.size(), n) << where;
        }
        if (shape == CutShape::kEqualSizes) {
          for (const Buffer& b : p.problem.buffers) EXPECT_EQ(b.size, p.problem.buffers.front().size) << where;
        }
      }
    }
  }
}

TEST(PerfectPacking, TheSameSeedGivesTheSameInstance) {
  const PerfectPacking a = perfect_packing(42, 300, CutShape::kStaircase);
  const PerfectPacking b = perfect_packing(42, 300, CutShape::kStaircase);
  const PerfectPacking c = perfect_packing(43, 300, CutShape::kStaircase);
  ASSERT_EQ(a.problem.buffers.size(), b.problem.buffers.size());
  for (std::size_t i = 0; i < a.problem.buffers.size(); ++i) {
    EXPECT_EQ(a.problem.buffers[i].size, b.problem.buffers[i].size);
    EXPECT_EQ(a.problem.buffers[i].lower, b.problem.buffers[i].lower);
  }
  EXPECT_NE(a.offsets, c.offsets);
}

TEST(PerfectPacking, SmallOnesAreProvenOptimal) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    const PerfectPacking p = perfect_packing(seed, 12, CutShape::kGuillotine, 1 << 20, 100);
    SolveOptions options;
    options.time_limit_seconds = 20;
    const SolveResult r = solve(p.problem, options);
    EXPECT_TRUE(r.optimal) << "seed " << seed;
    EXPECT_EQ(r.plan.arena, p.height) << "seed " << seed;
  }
}

// Mid-size cuts of the shapes the benchmark still fails on (long buffers
// over hundreds of time sections) are proven within a node budget. One
// thread makes the search deterministic; each instance takes under 5,000
// nodes, so the budget leaves a margin of ten and only a loss of pruning
// fails it, not a slow machine.
TEST(PerfectPacking, MidSizeGuillotineAndStaircaseCutsAreProvenWithinANodeBudget) {
  for (CutShape shape : {CutShape::kGuillotine, CutShape::kStaircase}) {
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
      const PerfectPacking p = perfect_packing(seed, 600, shape);
      SolveOptions options;
      options.threads = 1;
      options.node_limit = 50000;
      options.time_limit_seconds = 60;
      const SolveResult r = solve(p.problem, options);
      EXPECT_TRUE(r.optimal) << to_string(shape) << " seed " << seed << ": " << to_string(r.stopped);
      EXPECT_EQ(r.plan.arena, p.height) << to_string(shape) << " seed " << seed;
      EXPECT_FALSE(validate(p.problem, r.plan.offsets).has_value()) << to_string(shape) << " seed " << seed;
    }
  }
}

// A guillotine cut that no systematic search packs within 150,000 nodes
// (with dives turned off, one thread stops there 16% to 41% above the
// optimum) is found by the portfolio's short randomized dives in about
// 13,000. One thread and a node budget keep it deterministic; the time
// limit is far beyond what the budget takes, so that the node budget, not
// the machine's speed, ends every phase.
TEST(PerfectPacking, DivesFindAGuillotineCutTheSystematicSearchesMiss) {
  const PerfectPacking p = perfect_packing(7, 1000, CutShape::kGuillotine);
  SolveOptions options;
  options.threads = 1;
  options.node_limit = 150000;
  options.time_limit_seconds = 3600;
  const SolveResult r = solve(p.problem, options);
  EXPECT_TRUE(r.optimal) << to_string(r.stopped) << ", arena " << r.plan.arena;
  EXPECT_EQ(r.plan.arena, p.height);
  EXPECT_FALSE(validate(p.problem, r.plan.offsets).has_value());
}

// No pruning rule of the skyline search cuts a known optimal packing: told
// the packing's choice at each point (follow()), the search walks to it
// without a dead end, in every family, the ones it proves and the ones it
// does not. (A rule that cut one would make "no plan of height H" a lie.)
// Checked here: the bounds, the release check and the tiling filter, time
// running forward; not the failed-states table the portfolio shares. The
// same walk counts where the search's own order chooses otherwise
// (bench/perfect_packings.cpp, `replay`).
TEST(PerfectPacking, TheSkylineSearchNeverPrunesAKnownPacking) {
  for (CutShape shape : {CutShape::kGuillotine, CutShape::kStrips, CutShape::kStaircase, CutShape::kSpine,
                         CutShape::kPinwheel, CutShape::kEqualSizes}) {
    for (std::uint64_t seed : {1u, 2u, 3u}) {
      const PerfectPacking p = perfect_packing(seed, 400, shape);
      const std::vector<std::int64_t> low = detail::pushed_down(p.problem, p.offsets);
      ASSERT_FALSE(validate(p.problem, low).has_value());
      ASSERT_LE(arena_size(p.problem, low), p.height);
      std::vector<int> members(p.problem.buffers.size());
      for (std::size_t i = 0; i < members.size(); ++i) members[i] = static_cast<int>(i);
      for (const bool tiling : {false, true}) {
        detail::SkylineSearch search(p.problem, members, detail::RankOrder::Area, detail::Focus::TightFirst, 0, false,
                                     detail::Preference::Flattest, tiling);
        detail::SkylineSearch::GuideStats stats;
        search.follow(low, &stats);
        detail::SearchBudget budget;
        budget.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        std::vector<std::int64_t> offsets(members.size(), -1);
        const std::string where =
            std::string(to_string(shape)) + " seed " + std::to_string(seed) + (tiling ? " tiling" : "");
        EXPECT_EQ(search.find(p.height, budget, offsets), detail::SearchStatus::Found) << where;
        EXPECT_FALSE(stats.blocked) << where;
        EXPECT_EQ(stats.placements, members.size()) << where;
        EXPECT_FALSE(validate(p.problem, offsets).has_value()) << where;
        EXPECT_LE(arena_size(p.problem, offsets), p.height) << where;
      }
    }
  }
}

}  // namespace
}  // namespace gpumem::plan
