// Replaying traces under allocator policies, and the optimum.
#include <random>

#include <gtest/gtest.h>

#include "gpumem/alloc/policies/policy_registry.h"
#include "gpumem/common/error.h"
#include "gpumem/trace/replay.h"

namespace gpumem::trace {
namespace {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;

// A training-like trace: persistent weights, then iterations whose
// activations vary in size (dynamic shapes) and die in reverse order.
Trace dynamic_training_trace(int iterations, std::uint64_t seed) {
  Trace t;
  t.source = "synthetic";
  t.format = "test";
  std::mt19937_64 rng(seed);
  std::uint64_t next = 1;
  auto alloc = [&](std::int64_t size) {
    Event e;
    e.action = Action::kAlloc;
    e.address = (next++) << 24;
    e.size = size;
    t.events.push_back(e);
    return e.address;
  };
  auto free = [&](std::uint64_t address, std::int64_t size) {
    Event e;
    e.action = Action::kFreeCompleted;
    e.address = address;
    e.size = size;
    t.events.push_back(e);
  };
  for (int w = 0; w < 20; ++w) alloc(4 * kMiB + w * 4096);
  for (int it = 0; it < iterations; ++it) {
    const std::int64_t scale = 1 + static_cast<std::int64_t>(rng() % 8);
    std::vector<std::pair<std::uint64_t, std::int64_t>> saved;
    for (int layer = 0; layer < 24; ++layer) {
      std::int64_t size = scale * (kMiB / 2 + layer * 65536) + static_cast<std::int64_t>(rng() % 4096);
      saved.emplace_back(alloc(size), size);
      std::int64_t tmp_size = size / 3 + 100;
      std::uint64_t tmp = alloc(tmp_size);
      free(tmp, tmp_size);
    }
    while (!saved.empty()) {
      free(saved.back().first, saved.back().second);
      saved.pop_back();
    }
  }
  return t;
}

// The most bytes live at once, by brute force over the trace's own events
// (each allocation adds its size, each free takes it away), and the first
// event that reaches it: a figure replay does not compute this way.
struct LivePeak {
  std::int64_t bytes = 0;
  std::size_t first_event = 0;
};

LivePeak sweep_live_bytes(const Trace& t) {
  LivePeak peak;
  std::int64_t live = 0;
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const Event& e = t.events[i];
    live += e.action == Action::kAlloc ? e.size : -e.size;
    if (live > peak.bytes) peak = {live, i};
  }
  return peak;
}

TEST(Replay, EveryPolicyReservesAtLeastThePeakWhichIsTheLowerBound) {
  Trace t = dynamic_training_trace(30, 1);
  ReplayOptions options;
  options.optimal_time_limit = 2;
  options.policies = alloc::policy_names();  // gpumem-planned too, which is only run by name
  ReplayReport r = replay(t, options);
  EXPECT_EQ(r.allocations, 20u + 30u * 48u);
  // Nothing is freed before it is allocated here, so the most bytes live at
  // once is both the peak and the bound on any packing of these lifetimes.
  const LivePeak swept = sweep_live_bytes(t);
  EXPECT_EQ(r.traced_peak, swept.bytes);
  EXPECT_EQ(r.lower_bound, swept.bytes);
  EXPECT_EQ(r.traced_peak_event, swept.first_event);
  ASSERT_EQ(r.policies.size(), alloc::policy_names().size());
  for (const PolicyResult& p : r.policies) {
    EXPECT_GE(p.peak_reserved, r.traced_peak) << p.name;
    EXPECT_FALSE(p.oom_at_event) << p.name;
    EXPECT_GT(p.upstream_calls, 0u) << p.name;
    EXPECT_GE(p.fragmentation_at_peak, 0.0) << p.name;
    EXPECT_LT(p.fragmentation_at_peak, 1.0) << p.name;
  }
  EXPECT_GE(r.optimal_arena, r.lower_bound);
  // The planner knows the future; no online policy packs tighter.
  for (const PolicyResult& p : r.policies) EXPECT_GE(p.peak_reserved, r.optimal_arena) << p.name;
}

TEST(Replay, ReportsWhereEachPolicyRunsOutOfMemory) {
  Trace t = dynamic_training_trace(10, 2);
  ReplayOptions options;
  options.optimal_time_limit = 0;
  options.policies = {"gpumem", "pytorch"};
  ReplayReport unlimited = replay(t, options);
  options.capacity = static_cast<std::size_t>(unlimited.traced_peak - 1);
  ReplayReport tight = replay(t, options);
  for (const PolicyResult& p : tight.policies) {
    ASSERT_TRUE(p.oom_at_event) << p.name;
    EXPECT_LE(*p.oom_at_event, tight.traced_peak_event) << p.name;
    EXPECT_EQ(t.events[*p.oom_at_event].action, Action::kAlloc);
    EXPECT_NE(p.oom_message.find("out of memory"), std::string::npos) << p.oom_message;
  }
  // At the largest reservation a policy made, everything fits.
  options.capacity = static_cast<std::size_t>(unlimited.policies[0].peak_reserved);
  ReplayReport roomy = replay(t, options);
  EXPECT_FALSE(roomy.policies[0].oom_at_event);
}

TEST(Replay, UnknownPolicyListsTheKnownOnes) {
  Trace t = dynamic_training_trace(1, 3);
  ReplayOptions options;
  options.policies = {"tcmalloc"};
  try {
    replay(t, options);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown policy 'tcmalloc' (known: gpumem, gpumem-expandable"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace gpumem::trace
