// Plans and their bounds: validate() on hand-made plans (each kind of
// violation, touching-but-legal neighbours), lower_bound() and arena_size(),
// then randomized differential tests of both against brute force.
#include <algorithm>
#include <limits>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gpumem/common/error.h"
#include "gpumem/plan/csv.h"
#include "gpumem/plan/problem.h"
#include "gpumem/plan/validate.h"

namespace gpumem::plan {
namespace {

// MiniMalloc's README example: lower bound 12, packed at 12.
Problem example() {
  return parse_csv(
             "id,lower,upper,size\n"
             "b1,0,3,4\n"
             "b2,3,9,4\n"
             "b3,0,9,4\n"
             "b4,9,21,4\n"
             "b5,0,21,4\n",
             "input.12.csv")
      .problem;
}

Buffer buffer(std::string id, int64_t lower, int64_t upper, int64_t size, int64_t alignment = 1,
              std::optional<int64_t> fixed = std::nullopt) {
  return Buffer{std::move(id), lower, upper, size, alignment, fixed};
}

// "valid", or the violation's message.
std::string outcome(const Problem& p, const std::vector<int64_t>& offsets) {
  const auto v = validate(p, offsets);
  return v ? v->message : "valid";
}

TEST(PlanValidate, MiniMallocsExamplePacksAtItsLowerBound) {
  const Problem p = example();
  EXPECT_EQ(lower_bound(p), 12);
  const std::vector<int64_t> offsets = {0, 0, 4, 0, 8};
  EXPECT_EQ(outcome(p, offsets), "valid");
  EXPECT_EQ(arena_size(p, offsets), 12);
  // Another packing at 12: b5 at the bottom.
  EXPECT_EQ(outcome(p, {8, 8, 4, 4, 0}), "valid");
}

TEST(PlanValidate, NamesTheFirstTwoCollidingBuffers) {
  const Problem p = example();
  // b3 and b5 collide from time 0; b4 and b5 also collide, but only from 9.
  const auto v = validate(p, {8, 8, 0, 0, 2});
  ASSERT_TRUE(v);
  EXPECT_EQ(v->kind, Violation::Kind::Overlap);
  EXPECT_EQ(v->first, 2);
  EXPECT_EQ(v->second, 4);
  EXPECT_EQ(v->message, "buffers 'b3' [0,9) at [0,4) and 'b5' [0,21) at [2,6) overlap");
}

TEST(PlanValidate, ReportsTheCollisionEarliestInTimeNotInIndexOrder) {
  Problem p;
  p.buffers.push_back(buffer("late1", 10, 20, 4));
  p.buffers.push_back(buffer("late2", 15, 20, 4));  // collides with late1 from 15
  p.buffers.push_back(buffer("early1", 0, 5, 4));
  p.buffers.push_back(buffer("early2", 2, 5, 4));  // collides with early1 from 2
  const auto v = validate(p, {0, 2, 0, 3});
  ASSERT_TRUE(v);
  EXPECT_EQ(v->first, 2);
  EXPECT_EQ(v->second, 3);
  EXPECT_EQ(v->message, "buffers 'early1' [0,5) at [0,4) and 'early2' [2,5) at [3,7) overlap");
}

TEST(PlanValidate, BuffersMayTouchInTimeOrInSpace) {
  Problem p;
  p.buffers.push_back(buffer("a", 0, 3, 4));
  p.buffers.push_back(buffer("b", 3, 9, 4));  // starts when a ends: same bytes are fine
  EXPECT_EQ(outcome(p, {0, 0}), "valid");
  EXPECT_EQ(lower_bound(p), 4);
  p.buffers[1].lower = 2;
  EXPECT_TRUE(validate(p, {0, 0}));
  EXPECT_EQ(lower_bound(p), 8);

  Problem q;
  q.buffers.push_back(buffer("x", 0, 9, 4));
  q.buffers.push_back(buffer("y", 0, 9, 4));
  EXPECT_EQ(outcome(q, {0, 4}), "valid");  // [0,4) and [4,8): adjacent
  EXPECT_EQ(outcome(q, {4, 0}), "valid");
  const auto v = validate(q, {0, 3});
  ASSERT_TRUE(v);
  EXPECT_EQ(v->message, "buffers 'x' [0,9) at [0,4) and 'y' [0,9) at [3,7) overlap");
  EXPECT_TRUE(validate(q, {3, 0}));
  EXPECT_TRUE(validate(q, {5, 5}));  // same offset
}

TEST(PlanValidate, EmptyBuffersNeverCollide) {
  Problem p;
  p.buffers.push_back(buffer("big", 0, 10, 100));
  p.buffers.push_back(buffer("empty", 0, 10, 0));
  p.buffers.push_back(buffer("dead", 5, 5, 8));  // empty lifetime (only code can build one)
  EXPECT_EQ(outcome(p, {0, 50, 50}), "valid");
  EXPECT_EQ(lower_bound(p), 100);
}

TEST(PlanValidate, Misaligned) {
  Problem p = example();
  p.buffers[2].alignment = 4;
  p.buffers[4].alignment = 3;  // alignments need not be powers of two
  EXPECT_EQ(outcome(p, {0, 0, 4, 0, 9}), "valid");
  const auto v = validate(p, {0, 0, 4, 0, 8});
  ASSERT_TRUE(v);
  EXPECT_EQ(v->kind, Violation::Kind::Misaligned);
  EXPECT_EQ(v->first, 4);
  EXPECT_EQ(v->second, -1);
  EXPECT_EQ(v->message, "buffer 'b5' is misaligned: offset 8 is not a multiple of its alignment 3");
}

TEST(PlanValidate, FixedOffsetsMustBeKept) {
  Problem p = example();
  p.buffers[4].fixed_offset = 8;
  EXPECT_EQ(outcome(p, {0, 0, 4, 0, 8}), "valid");
  const auto v = validate(p, {0, 0, 8, 0, 4});
  ASSERT_TRUE(v);
  EXPECT_EQ(v->kind, Violation::Kind::FixedMoved);
  EXPECT_EQ(v->first, 4);
  EXPECT_EQ(v->message, "buffer 'b5' is fixed at offset 8 but placed at 4");
}

TEST(PlanValidate, NegativeOffsetsAndWrongCounts) {
  const Problem p = example();
  const auto neg = validate(p, {0, -4, 4, 0, 8});
  ASSERT_TRUE(neg);
  EXPECT_EQ(neg->kind, Violation::Kind::Negative);
  EXPECT_EQ(neg->first, 1);
  EXPECT_EQ(neg->message, "buffer 'b2' has a negative offset -4");

  const auto count = validate(p, {0, 0, 4, 0});
  ASSERT_TRUE(count);
  EXPECT_EQ(count->kind, Violation::Kind::WrongCount);
  EXPECT_EQ(count->first, -1);
  EXPECT_EQ(count->message, "the plan has 4 offsets for 5 buffers");
  EXPECT_EQ(outcome(Problem{}, {}), "valid");
}

TEST(PlanValidate, PerBufferChecksComeBeforeOverlaps) {
  // Everything at 0 collides, but the misaligned buffer is reported first.
  Problem p = example();
  p.buffers[3].alignment = 8;
  const auto v = validate(p, {0, 0, 0, 4, 0});
  ASSERT_TRUE(v);
  EXPECT_EQ(v->kind, Violation::Kind::Misaligned);
  EXPECT_EQ(v->first, 3);
}

TEST(PlanValidate, NamesAreEscapedAndHugeOffsetsDoNotOverflow) {
  Problem p;
  p.buffers.push_back(buffer("a\nb", 0, 2, std::numeric_limits<int64_t>::max()));
  p.buffers.push_back(buffer("c", 1, 2, std::numeric_limits<int64_t>::max()));
  const int64_t top = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(outcome(p, {0, top}), "valid");  // [0, 2^63-1) and [2^63-1, 2^64-2): apart
  const auto w = validate(p, {0, top - 1});
  ASSERT_TRUE(w);
  EXPECT_EQ(w->message,
            "buffers 'a\\x0ab' [0,2) at [0,9223372036854775807) and 'c' [1,2) at "
            "[9223372036854775806,18446744073709551613) overlap");
  EXPECT_THROW(arena_size(p, {0, top}), InputError);
  EXPECT_THROW(lower_bound(p), InputError);
}

TEST(PlanValidate, ScalesToLargePlans) {
  // 200,000 buffers, three live at a time in three slots: O(n^2) would not finish.
  constexpr int n = 200000;
  Problem p;
  std::vector<int64_t> offsets;
  for (int i = 0; i < n; ++i) {
    p.buffers.push_back(buffer(fmt::format("t{}", i), i, i + 3, 8));
    offsets.push_back((i % 3) * 8);
  }
  EXPECT_EQ(outcome(p, offsets), "valid");
  EXPECT_EQ(lower_bound(p), 24);
  EXPECT_EQ(arena_size(p, offsets), 24);
  offsets[n - 1] = offsets[n - 2] + 4;
  const auto v = validate(p, offsets);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->first, n - 2);
  EXPECT_EQ(v->second, n - 1);
}

TEST(PlanLowerBound, EndsComeBeforeStartsAndEmptyProblemsAreZero) {
  EXPECT_EQ(lower_bound(Problem{}), 0);
  EXPECT_EQ(arena_size(Problem{}, {}), 0);
  Problem p;
  p.buffers.push_back(buffer("a", 0, 5, 10));
  p.buffers.push_back(buffer("b", 5, 9, 7));
  p.buffers.push_back(buffer("c", 4, 6, 1));
  EXPECT_EQ(lower_bound(p), 11);  // a+c at 4, b+c at 5
  EXPECT_EQ(arena_size(p, {0, 3, 10}), 11);
  EXPECT_THROW(arena_size(p, {0, 3}), std::invalid_argument);
}

// --- Randomized differential tests ------------------------------------------

bool collide(const Buffer& a, int64_t oa, const Buffer& b, int64_t ob) {
  return a.size > 0 && b.size > 0 && a.overlaps_in_time(b) && oa < ob + b.size && ob < oa + a.size;
}

// The O(n^2) check: per-buffer rules in problem order, then every pair.
// Returns the expected kind and, for an overlap, the buffer that must appear
// in the reported pair: the first, in order of (lower, index), to start while
// a buffer ahead of it in that order, still alive, shares a byte with it.
struct Expected {
  std::optional<Violation::Kind> kind;
  int first = -1;
};

Expected brute_force(const Problem& p, const std::vector<int64_t>& offsets) {
  const size_t n = p.buffers.size();
  for (size_t i = 0; i < n; ++i) {
    const Buffer& b = p.buffers[i];
    if (offsets[i] < 0) return {Violation::Kind::Negative, static_cast<int>(i)};
    if (offsets[i] % b.alignment != 0) return {Violation::Kind::Misaligned, static_cast<int>(i)};
    if (b.fixed_offset && *b.fixed_offset != offsets[i]) return {Violation::Kind::FixedMoved, static_cast<int>(i)};
  }
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return p.buffers[a].lower < p.buffers[b].lower; });
  for (size_t k = 0; k < n; ++k) {
    for (size_t j = 0; j < k; ++j) {
      const size_t a = order[j], b = order[k];
      if (collide(p.buffers[a], offsets[a], p.buffers[b], offsets[b])) {
        return {Violation::Kind::Overlap, static_cast<int>(b)};
      }
    }
  }
  return {};
}

struct RandomCase {
  Problem problem;
  std::vector<int64_t> offsets;
};

RandomCase random_case(std::mt19937& rng) {
  const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  RandomCase c;
  const int n = pick(0, 8);
  for (int i = 0; i < n; ++i) {
    const int64_t lower = pick(0, 9);
    Buffer b = buffer(fmt::format("b{}", i), lower, lower + pick(1, 6), pick(0, 9) == 0 ? 0 : pick(1, 5),
                      pick(0, 3) == 0 ? pick(2, 3) : 1);
    c.problem.buffers.push_back(b);
  }
  // Half the plans are built valid (first fit, aligned), then maybe nudged;
  // the rest are random offsets.
  if (pick(0, 1) == 0) {
    for (size_t i = 0; i < c.problem.buffers.size(); ++i) {
      const Buffer& b = c.problem.buffers[i];
      int64_t offset = 0;
      for (bool moved = true; moved;) {
        moved = false;
        for (size_t j = 0; j < i; ++j) {
          if (collide(b, offset, c.problem.buffers[j], c.offsets[j])) {
            offset = c.offsets[j] + c.problem.buffers[j].size;
            moved = true;
          }
        }
        if (offset % b.alignment != 0) {
          offset += b.alignment - offset % b.alignment;
          moved = true;
        }
      }
      c.offsets.push_back(offset);
    }
    if (!c.offsets.empty() && pick(0, 2) == 0) {
      const size_t i = static_cast<size_t>(pick(0, n - 1));
      c.offsets[i] = std::max<int64_t>(0, c.offsets[i] + pick(-3, 3) * c.problem.buffers[i].alignment);
    }
  } else {
    for (const Buffer& b : c.problem.buffers) c.offsets.push_back(pick(0, 30) == 0 ? -1 : pick(0, 12) * b.alignment);
    if (!c.offsets.empty() && pick(0, 9) == 0) c.offsets[static_cast<size_t>(pick(0, n - 1))] += 1;
  }
  for (size_t i = 0; i < c.problem.buffers.size(); ++i) {
    if (pick(0, 19) == 0) c.problem.buffers[i].fixed_offset = pick(0, 4) == 0 ? c.offsets[i] + 1 : c.offsets[i];
  }
  return c;
}

TEST(PlanValidateDifferential, AgreesWithPairwiseBruteForce) {
  std::mt19937 rng(20230325);
  int valid = 0, overlaps = 0, others = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    const RandomCase c = random_case(rng);
    const Problem& p = c.problem;
    SCOPED_TRACE(write_csv(p, c.offsets));
    const Expected want = brute_force(p, c.offsets);
    const auto got = validate(p, c.offsets);
    ASSERT_EQ(got.has_value(), want.kind.has_value()) << (got ? got->message : "valid");
    if (!got) {
      ++valid;
      EXPECT_GE(arena_size(p, c.offsets), lower_bound(p));  // no valid plan beats the lower bound
      continue;
    }
    ASSERT_EQ(got->kind, *want.kind) << got->message;
    if (got->kind != Violation::Kind::Overlap) {
      ++others;
      EXPECT_EQ(got->first, want.first) << got->message;
      EXPECT_EQ(got->second, -1);
      continue;
    }
    ++overlaps;
    ASSERT_LT(got->first, got->second);
    ASSERT_GE(got->first, 0);
    const auto a = static_cast<size_t>(got->first), b = static_cast<size_t>(got->second);
    EXPECT_TRUE(collide(p.buffers[a], c.offsets[a], p.buffers[b], c.offsets[b])) << got->message;
    EXPECT_TRUE(got->first == want.first || got->second == want.first) << got->message;
    EXPECT_NE(got->message.find("'" + p.buffers[a].id + "'"), std::string::npos);
    EXPECT_NE(got->message.find("'" + p.buffers[b].id + "'"), std::string::npos);
  }
  // The generator reaches every outcome often.
  EXPECT_GT(valid, 10000);
  EXPECT_GT(overlaps, 3000);
  EXPECT_GT(others, 1000);
}

TEST(PlanLowerBoundDifferential, AgreesWithASumAtEveryTime) {
  std::mt19937 rng(42);
  const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 5000; ++trial) {
    Problem p;
    const int n = pick(0, 12);
    for (int i = 0; i < n; ++i) {
      const int lower = pick(0, 15);
      p.buffers.push_back(buffer(fmt::format("b{}", i), lower, lower + pick(1, 8), pick(1, 100)));
    }
    int64_t want = 0;
    for (int64_t t = 0; t < 24; ++t) {
      int64_t live = 0;
      for (const Buffer& b : p.buffers) live += b.lower <= t && t < b.upper ? b.size : 0;
      want = std::max(want, live);
    }
    ASSERT_EQ(lower_bound(p), want) << write_csv(p, {});
  }
}

}  // namespace
}  // namespace gpumem::plan
