// Pairing allocations with frees, anomalies, statistics and leak shapes, on
// traces built event by event.
#include <gtest/gtest.h>

#include "gpumem/common/error.h"
#include "gpumem/trace/lifetimes.h"
#include "gpumem/trace/trace_stats.h"

namespace gpumem::trace {
namespace {

class TraceBuilder {
 public:
  TraceBuilder() { t.source = "built.trace"; t.format = "test"; }
  TraceBuilder& alloc(std::uint64_t address, std::int64_t size, const std::string& tag = "") {
    Event e;
    e.action = Action::kAlloc;
    e.address = address;
    e.size = size;
    e.context = tag.empty() ? 0 : t.intern(Context{tag, {}});
    t.events.push_back(e);
    return *this;
  }
  TraceBuilder& free(std::uint64_t address, std::int64_t size, Action action = Action::kFreeCompleted) {
    Event e;
    e.action = action;
    e.address = address;
    e.size = size;
    t.events.push_back(e);
    return *this;
  }
  Trace t;
};

TEST(Lifetimes, PairsAllocationsWithTheirFrees) {
  TraceBuilder b;
  b.alloc(0x1000, 100).alloc(0x2000, 200).free(0x1000, 100).alloc(0x1000, 50).free(0x2000, 200);
  Lifetimes l = extract_lifetimes(b.t, 0, true);
  ASSERT_EQ(l.allocations.size(), 3u);
  EXPECT_EQ(l.allocations[0].free_event, 2u);
  EXPECT_EQ(l.allocations[1].free_event, 4u);
  EXPECT_EQ(l.allocations[2].free_event, kNeverFreed);  // reused address, new allocation
  EXPECT_EQ(l.anomalies.total(), 0u);
}

TEST(Lifetimes, FreeRequestedEndsAllocationsWhenNothingCompletes) {
  TraceBuilder b;
  b.alloc(0x1000, 100).free(0x1000, 100, Action::kFreeRequested);
  Lifetimes l = extract_lifetimes(b.t, 0, true);
  EXPECT_EQ(l.free_action, Action::kFreeRequested);
  EXPECT_EQ(l.allocations[0].free_event, 1u);
  // With free_completed present, it is the completion that ends it.
  b.free(0x1000, 100, Action::kFreeCompleted);
  l = extract_lifetimes(b.t, 0, true);
  EXPECT_EQ(l.allocations[0].free_event, 2u);
}

TEST(Lifetimes, SkipsAndCountsWhatMakesNoSense) {
  TraceBuilder b;
  b.alloc(0x1000, 100)
      .free(0x9000, 10)    // 1: unknown
      .alloc(0x1000, 30)   // 2: address still live
      .free(0x1000, 100)   // 3
      .free(0x1000, 100)   // 4: double free
      .alloc(0x3000, -5);  // 5: negative
  Lifetimes l = extract_lifetimes(b.t, 0, false);
  EXPECT_EQ(l.anomalies.unknown_frees, 1u);
  EXPECT_EQ(l.anomalies.live_address_allocs, 1u);
  EXPECT_EQ(l.anomalies.double_frees, 1u);
  EXPECT_EQ(l.anomalies.negative_sizes, 1u);
  ASSERT_EQ(l.anomalies.examples.size(), 4u);
  EXPECT_EQ(l.anomalies.examples[0], "built.trace: event 1: free of 0x9000, which the trace never allocated");
  EXPECT_EQ(l.allocations.size(), 1u);
  try {
    extract_lifetimes(b.t, 0, true);
    FAIL() << "strict accepted an unknown free";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("built.trace: event 1: free of 0x9000"), std::string::npos) << e.what();
  }
}

TEST(Lifetimes, RunningTotalsGiveTheBaseline) {
  TraceBuilder b;
  b.alloc(0x1000, 100);
  b.t.events.back().total_allocated = 1100;  // 1000 bytes were live before
  b.free(0x7777, 400);                       // one of them, freed
  b.t.events.back().total_allocated = 700;
  Lifetimes l = extract_lifetimes(b.t, 0, false);
  EXPECT_EQ(l.baseline, 1000);
  ASSERT_EQ(l.baseline_frees.size(), 1u);
  TraceStats s = trace_stats(b.t, l);
  EXPECT_EQ(s.peak_allocated, 1100);
  EXPECT_EQ(s.source_peak_allocated, 1100);
}

TEST(Lifetimes, AsAPlanningProblem) {
  TraceBuilder b;
  b.alloc(0x1000, 100).alloc(0x2000, 200).free(0x1000, 100);
  plan::Problem p = to_problem(extract_lifetimes(b.t, 0, true), b.t.events.size());
  ASSERT_EQ(p.buffers.size(), 2u);
  EXPECT_EQ(p.buffers[0].lower, 0);
  EXPECT_EQ(p.buffers[0].upper, 2);
  EXPECT_EQ(p.buffers[1].upper, 3);  // never freed: to the end
  EXPECT_EQ(plan::lower_bound(p), 300);
}

// Training-like iterations: activations freed each step, plus a leak.
Trace iterations(int steps, std::int64_t leak_each, int step_at = -1) {
  TraceBuilder b;
  std::uint64_t next = 0x100000;
  b.alloc(next++ * 4096, 1 << 20, "weights");
  for (int i = 0; i < steps; ++i) {
    std::uint64_t a = next++ * 4096, c = next++ * 4096;
    b.alloc(a, 4096, "conv").alloc(c, 8192, "relu").free(a, 4096).free(c, 8192);
    std::int64_t leak = leak_each + (i == step_at ? 100000 : 0);
    if (leak) b.alloc(next++ * 4096, leak, "cache");
    else b.alloc(next * 4096, 512, "tmp").free(next * 4096, 512), ++next;
  }
  return b.t;
}

TEST(TraceStats, FindsThePeakLargestAndNeverFreed) {
  Trace t = iterations(4, 0);
  TraceStats s = trace_stats(t, extract_lifetimes(t, 0, true));
  EXPECT_EQ(s.allocations, 13u);
  EXPECT_EQ(s.peak_allocated, (1 << 20) + 4096 + 8192);
  EXPECT_EQ(s.peak_event, 2u);
  EXPECT_EQ(s.never_freed, 1u);
  ASSERT_EQ(s.never_freed_by_context.size(), 1u);
  EXPECT_EQ(s.never_freed_by_context[0].label, "weights");
  EXPECT_EQ(s.largest.front().size, 1 << 20);
  EXPECT_EQ(s.largest.front().label, "weights");
}

TEST(TraceStats, TellsSteadyGrowthFromAStep) {
  Trace flat = iterations(6, 0);
  TraceStats f = trace_stats(flat, extract_lifetimes(flat, 0, true));
  ASSERT_TRUE(f.iterations.repeats);
  EXPECT_EQ(f.iterations.period, 3u);
  EXPECT_EQ(f.iterations.shape, "flat");

  Trace leak = iterations(6, 50000);
  TraceStats g = trace_stats(leak, extract_lifetimes(leak, 0, true));
  ASSERT_TRUE(g.iterations.repeats);
  EXPECT_EQ(g.iterations.shape, "steady growth");
  EXPECT_EQ(g.iterations.growth_per_iteration, 50000);
  EXPECT_EQ(g.never_freed_by_context[0].label, "weights");
  EXPECT_EQ(g.never_freed_by_context[1].label, "cache");
  EXPECT_EQ(g.never_freed_by_context[1].count, 6u);

  Trace step = iterations(12, 0, 2);
  TraceStats h = trace_stats(step, extract_lifetimes(step, 0, true));
  ASSERT_TRUE(h.iterations.repeats);
  EXPECT_EQ(h.iterations.shape, "step");
  EXPECT_EQ(h.iterations.growth_per_iteration, 100000);
}

TEST(TraceStats, FindPeriodNeedsTwoFullRepetitions) {
  EXPECT_EQ(find_period({1, 2, 3, 1, 2, 3, 1, 2, 3}), 3u);
  EXPECT_EQ(find_period({1, 2, 3, 4, 5, 6}), 0u);
  EXPECT_EQ(find_period({7, 7, 7, 7}), 1u);
  EXPECT_EQ(find_period({1, 2, 1}), 0u);
}

}  // namespace
}  // namespace gpumem::trace
