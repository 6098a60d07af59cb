// Planned mode: a repeating workload is served from the planned arena after
// one recorded iteration, blocks never overlap whatever the workload does,
// a changed workload is planned again, and a replay of a real three-
// iteration training trace ends fully planned.
#include "gpumem/alloc/planned_allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "gpumem/alloc/simulated_device.h"
#include "gpumem/common/error.h"
#include "gpumem/trace/replay.h"
#include "test_paths.h"

namespace gpumem::alloc {
namespace {

// Live blocks by address; fails the test when a new one overlaps one.
class Overlaps {
 public:
  void add(void* p, std::size_t bytes) {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    auto next = live_.lower_bound(a);
    if (next != live_.end()) ASSERT_GE(next->first, a + bytes) << "overlaps the next live block";
    if (next != live_.begin()) ASSERT_LE(std::prev(next)->second, a) << "overlaps the previous live block";
    live_[a] = a + bytes;
  }
  void remove(void* p) { live_.erase(reinterpret_cast<std::uintptr_t>(p)); }

 private:
  std::map<std::uintptr_t, std::uintptr_t> live_;
};

// One training-like iteration: activations in a stack, gradients freed
// soon, `extra` more allocations in the middle; `batch` scales every size
// (another shape).
void iteration(PlannedAllocator& a, Overlaps& overlaps, std::mt19937_64* jitter, int extra = 0, std::size_t batch = 1) {
  std::vector<std::pair<void*, std::size_t>> stack;
  for (int k = 0; k < 40 + extra; ++k) {
    std::size_t bytes = std::size_t(64 + 37 * k % 300) * 1024 * batch;
    if (jitter && (*jitter)() % 10 == 0) bytes += 4096;  // a size the plan has not seen
    void* p = a.allocate(bytes);
    overlaps.add(p, bytes);
    stack.emplace_back(p, bytes);
  }
  while (!stack.empty()) {
    auto [p, bytes] = stack.back();
    stack.pop_back();
    void* g = a.allocate(bytes / 2);
    overlaps.add(g, bytes / 2);
    overlaps.remove(p);
    a.deallocate(p, bytes);
    overlaps.remove(g);
    a.deallocate(g, bytes / 2);
  }
}

TEST(PlannedAllocator, ARepeatingWorkloadIsServedFromThePlan) {
  SimulatedDevice device;
  PlannedAllocator a(simulated_upstream(device));
  Overlaps overlaps;
  void* weights = a.allocate(8 << 20);  // before the first iteration: the cache's
  overlaps.add(weights, 8 << 20);
  for (int i = 0; i < 5; ++i) {
    a.step();
    iteration(a, overlaps, nullptr);
  }
  const PlannedStats s = a.planned_stats();
  EXPECT_EQ(s.plans, 1u);
  EXPECT_EQ(s.missed, 0u);
  EXPECT_EQ(s.planned, 4u * 80u) << "every allocation of the four iterations after the recorded one";
  ASSERT_TRUE(a.plan().has_value());
  EXPECT_TRUE(a.plan()->proven_optimal);
  // The arena is the iteration's peak: no more than the most bytes it had live.
  std::size_t stack = 0, peak = 0;
  for (int k = 0; k < 40; ++k) stack += std::size_t(64 + 37 * k % 300) * 1024;
  peak = stack + ((std::size_t(64 + 37 * 39 % 300) * 1024) / 2 + 511) / 512 * 512;
  EXPECT_LE(s.arena_bytes, peak);
  a.deallocate(weights, 8 << 20);
}

TEST(PlannedAllocator, BlocksNeverOverlapAndAChangedWorkloadIsPlannedAgain) {
  std::mt19937_64 rng(17);
  SimulatedDevice device;
  PlannedAllocator a(simulated_upstream(device));
  Overlaps overlaps;
  for (int i = 0; i < 30; ++i) {
    a.step();
    // Every tenth iteration changes shape; some sizes drift at random.
    iteration(a, overlaps, i % 3 == 2 ? &rng : nullptr, (i / 10) * 7);
  }
  const PlannedStats s = a.planned_stats();
  EXPECT_GT(s.plans, 1u) << "a changed iteration is planned again";
  EXPECT_GT(s.missed, 0u);
  EXPECT_GT(s.planned, s.missed * 4) << "most requests still come from a plan";
}

TEST(PlannedAllocator, ARequestOffThePlanTakesAFreeGapOfTheArena) {
  SimulatedDevice device;
  PlannedAllocator a(simulated_upstream(device));
  Overlaps overlaps;
  a.step();
  iteration(a, overlaps, nullptr);
  a.step();  // the plan: an arena as high as the iteration's peak
  const std::size_t reserved = device.counters().physical_used;
  // Early in the iteration most of the arena is free: an extra request
  // (past the first 16, where a difference would be another shape) fits
  // there, and the device gives nothing more.
  std::vector<std::pair<void*, std::size_t>> first;
  for (int k = 0; k < 20; ++k) {
    const std::size_t bytes = std::size_t(64 + 37 * k % 300) * 1024;  // as iteration() starts
    first.emplace_back(a.allocate(bytes), bytes);
    overlaps.add(first.back().first, bytes);
  }
  EXPECT_EQ(a.planned_stats().planned, 20u);
  void* extra = a.allocate(256 * 1024 + 100);
  overlaps.add(extra, 256 * 1024 + 100);
  EXPECT_EQ(a.planned_stats().gap_filled, 1u);
  EXPECT_EQ(a.planned_stats().missed, 0u);
  EXPECT_EQ(a.planned_stats().recordings, 1u) << "the same shape: no new recording";
  EXPECT_EQ(device.counters().physical_used, reserved);
  a.deallocate(extra, 256 * 1024 + 100);
  for (auto [p, bytes] : first) a.deallocate(p, bytes);
}

TEST(PlannedAllocator, AHugeRequestNeverComesFromTheArena) {
  SimulatedDevice device({.capacity = std::size_t{1} << 30});
  PlannedAllocator a(simulated_upstream(device));
  Overlaps overlaps;
  a.step();
  iteration(a, overlaps, nullptr);
  a.step();
  EXPECT_THROW((void)a.allocate(SIZE_MAX - 100), OutOfMemoryError);
  EXPECT_THROW((void)a.allocate(std::size_t{1} << 62), OutOfMemoryError);
  EXPECT_EQ(a.planned_stats().gap_filled, 0u);
}

TEST(PlannedAllocator, WhatThePlanExpectsToStayIsNoMissAndNoReplan) {
  // A request that outlives each iteration (offset -1 in the plan) is served
  // outside the arena every time without making the next iteration plan
  // again.
  SimulatedDevice device;
  PlannedAllocator a(simulated_upstream(device));
  Overlaps overlaps;
  std::vector<void*> kept;
  for (int i = 0; i < 5; ++i) {
    a.step();
    iteration(a, overlaps, nullptr);
    kept.push_back(a.allocate(1 << 20));  // outlives the iteration
  }
  EXPECT_EQ(a.planned_stats().plans, 1u);
  EXPECT_EQ(a.planned_stats().missed, 0u);
  EXPECT_EQ(a.planned_stats().gap_filled, 0u);
  for (void* p : kept) a.deallocate(p, 1 << 20);
}

TEST(PlannedAllocator, WhatOutlivesTheRecordedIterationHoldsExactlyItsBytes) {
  // The first iteration creates state lazily (an optimizer's), sizes no
  // segment would fit exactly; the later ones only repeat temporaries.
  SimulatedDevice device;
  PlannedAllocator a(simulated_upstream(device));
  Overlaps overlaps;
  std::vector<std::pair<void*, std::size_t>> state;
  std::size_t state_bytes = 0;
  a.deallocate(a.allocate(8 << 20), 8 << 20);  // before the first step: the cache's
  for (int i = 0; i < 4; ++i) {
    a.step();
    if (i == 0) EXPECT_EQ(device.counters().physical_used, 0u) << "the recording gives the idle cache back";
    iteration(a, overlaps, nullptr);
    for (int k = 0; i == 0 && k < 5; ++k) {
      const std::size_t bytes = std::size_t(300 + 77 * k) * 1024 + 100;
      state.emplace_back(a.allocate(bytes), bytes);
      overlaps.add(state.back().first, bytes);
      state_bytes += (bytes + 511) / 512 * 512;
    }
  }
  const PlannedStats s = a.planned_stats();
  // The state is over a quarter of the first iteration's peak: set-up. The
  // second iteration is recorded too, and its plan serves the others.
  EXPECT_EQ(s.recordings, 2u);
  EXPECT_EQ(s.plans, 1u);
  EXPECT_EQ(s.device_bytes, state_bytes) << "the state holds its own bytes, rounded to 512";
  EXPECT_EQ(s.missed, 0u);
  EXPECT_EQ(a.cache().stats().reserved_bytes[0].current, 0) << "nothing went to the cache";
  EXPECT_EQ(device.counters().physical_used, state_bytes + s.arena_bytes);
  for (auto [p, bytes] : state) a.deallocate(p, bytes);
  EXPECT_EQ(a.planned_stats().device_bytes, 0u);
  EXPECT_EQ(device.counters().physical_used, s.arena_bytes);
}

TEST(PlannedAllocator, ARequestExpectedToStayButFreedWithinItsIterationIsPlannedAgain) {
  // The recorded iteration keeps a buffer (a gradient allocated on the
  // first backward); the next ones allocate the same size at the same
  // point as a temporary. Served from its own device allocation once, it
  // is in the arena from the iteration after.
  SimulatedDevice device;
  PlannedOptions options;
  options.skip_set_up = false;  // the gradient the first iteration keeps is not set-up here
  PlannedAllocator a(simulated_upstream(device), AllocatorConfig::gpumem_defaults(), options);
  Overlaps overlaps;
  constexpr std::size_t kGrad = 3 << 20;
  void* kept = nullptr;
  for (int i = 0; i < 4; ++i) {
    a.step();
    void* g = a.allocate(kGrad);
    overlaps.add(g, kGrad);
    iteration(a, overlaps, nullptr);
    if (i == 0) {
      kept = g;
      continue;
    }
    overlaps.remove(g);
    a.deallocate(g, kGrad);
  }
  const PlannedStats s = a.planned_stats();
  EXPECT_EQ(s.plans, 2u);
  EXPECT_EQ(s.from_device, 1u + 80u + 1u) << "the recorded iteration's 81 requests, then the one expected to stay";
  EXPECT_EQ(s.planned, 80u + 81u + 81u);
  EXPECT_EQ(s.missed, 0u);
  overlaps.remove(kept);
  a.deallocate(kept, kGrad);
  EXPECT_EQ(device.counters().physical_used, s.arena_bytes);
}

TEST(PlannedAllocator, ABlockKeptIntoTheNextIterationOnlyComesFromTheCache) {
  // Gradients under zero_grad(set_to_none=True): allocated late in each
  // iteration, freed early in the next. One device allocation shows that
  // the entry cycles; from then on the cache serves it, not a device call
  // per iteration.
  SimulatedDevice device;
  PlannedAllocator a(simulated_upstream(device));
  Overlaps overlaps;
  constexpr std::size_t kGrad = 5 << 20;
  void* grad = nullptr;
  for (int i = 0; i < 6; ++i) {
    a.step();
    if (grad) {
      overlaps.remove(grad);
      a.deallocate(grad, kGrad);
    }
    iteration(a, overlaps, nullptr);
    grad = a.allocate(kGrad);
    overlaps.add(grad, kGrad);
  }
  const PlannedStats s = a.planned_stats();
  EXPECT_EQ(s.plans, 1u);
  EXPECT_EQ(s.missed, 0u);
  // The first iteration leaves the gradient, more than a quarter of its
  // peak: set-up, so the second is recorded too and planned.
  EXPECT_EQ(s.recordings, 2u);
  EXPECT_EQ(s.from_device, 81u + 81u + 1u) << "two recordings, then the gradient once";
  EXPECT_EQ(s.planned, 4u * 80u);
  EXPECT_EQ(s.device_bytes, 0u);
  overlaps.remove(grad);
  a.deallocate(grad, kGrad);
}

TEST(PlannedAllocator, ALeakGoesToTheDeviceAndNeverPinsTheArena) {
  // Each iteration keeps one more block (a leak): the plan expects it to
  // stay, so it takes an allocation of its own, and the arena stays free
  // between iterations.
  SimulatedDevice device;
  PlannedAllocator a(simulated_upstream(device));
  Overlaps overlaps;
  std::vector<void*> leaked;
  for (int i = 0; i < 6; ++i) {
    a.step();
    iteration(a, overlaps, nullptr);
    leaked.push_back(a.allocate(128 << 10));
    overlaps.add(leaked.back(), 128 << 10);
  }
  const PlannedStats s = a.planned_stats();
  EXPECT_EQ(s.plans, 1u);
  EXPECT_EQ(s.missed + s.gap_filled, 0u);
  EXPECT_EQ(s.device_bytes, 6u * (128 << 10));
  EXPECT_EQ(device.counters().physical_used, s.device_bytes + s.arena_bytes);
  for (void* p : leaked) a.deallocate(p, 128 << 10);
}

TEST(PlannedAllocator, RandomWorkloadsOnASmallDeviceNeverOverlapNorLoseMemory) {
  // Iterations that repeat with drift, blocks kept across iterations, and a
  // device small enough that allocations, arenas and kept entries are
  // refused now and then: whatever happens, no two live blocks overlap, and
  // once everything is freed only the arena and the cache's segments hold
  // memory.
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    SimulatedDevice device({.capacity = 48 << 20});
    PlannedAllocator a(simulated_upstream(device));
    Overlaps overlaps;
    std::vector<std::pair<void*, std::size_t>> kept;
    std::uint64_t refused = 0;
    for (int i = 0; i < 10; ++i) {
      a.step();
      std::vector<std::pair<void*, std::size_t>> live;
      for (int k = 0; k < 60; ++k) {
        std::size_t bytes = std::size_t(1 + (k * 7 + 3) % 11) << 19;
        if (rng() % 8 == 0) bytes += 4096 * (rng() % 3);
        try {
          void* p = a.allocate(bytes);
          overlaps.add(p, bytes);
          (rng() % 20 == 0 ? kept : live).emplace_back(p, bytes);
        } catch (const OutOfMemoryError&) {
          ++refused;
        }
        if (!live.empty() && rng() % 3 != 0) {
          const std::size_t at = rng() % live.size();
          overlaps.remove(live[at].first);
          a.deallocate(live[at].first, live[at].second);
          live.erase(live.begin() + static_cast<std::ptrdiff_t>(at));
        }
        if (!kept.empty() && rng() % 10 == 0) {
          overlaps.remove(kept.front().first);
          a.deallocate(kept.front().first, kept.front().second);
          kept.erase(kept.begin());
        }
      }
      for (auto [p, bytes] : live) {
        overlaps.remove(p);
        a.deallocate(p, bytes);
      }
    }
    for (auto [p, bytes] : kept) {
      overlaps.remove(p);
      a.deallocate(p, bytes);
    }
    const PlannedStats s = a.planned_stats();
    EXPECT_EQ(s.device_bytes, 0u);
    EXPECT_EQ(device.counters().physical_used,
              s.arena_bytes + static_cast<std::size_t>(a.cache().stats().reserved_bytes[0].current));
    EXPECT_GT(s.planned, 0u);
    if (seed == 1) EXPECT_GT(refused + s.arena_refused, 0u) << "the device is small enough to refuse";
  }
}

TEST(PlannedAllocator, ShapesThatComeBackAreServedByTheirOwnPlansFromOneArena) {
  // Inference at batch sizes that alternate: each shape is recorded once,
  // then each iteration takes its shape's plan, told by its first request,
  // in the one arena (the larger shape's), with no device call at all.
  SimulatedDevice device;
  PlannedAllocator a(simulated_upstream(device));
  Overlaps overlaps;
  const std::size_t batches[] = {1, 3, 1, 3, 2, 1, 3, 2, 2, 1};
  std::uint64_t calls_before_last = 0;
  std::size_t reserved_before_last = 0;
  for (std::size_t i = 0; i < std::size(batches); ++i) {
    a.step();
    if (i == 5) {  // the third shape's plan in force, in an arena for all three
      calls_before_last = device.counters().upstream_calls();
      reserved_before_last = device.counters().physical_used;
    }
    iteration(a, overlaps, nullptr, 0, batches[i]);
  }
  const PlannedStats s = a.planned_stats();
  EXPECT_EQ(s.recordings, 3u) << "one per shape";
  EXPECT_EQ(s.plans, 3u);
  EXPECT_EQ(s.shapes, 3u);
  EXPECT_EQ(s.missed + s.gap_filled, 0u);
  EXPECT_EQ(s.planned, 80u * 7u) << "every request of every iteration after its shape's recording";
  EXPECT_EQ(s.shape_switches, 6u);
  EXPECT_EQ(device.counters().upstream_calls(), calls_before_last) << "the last five iterations call no device";
  EXPECT_EQ(device.counters().physical_used, reserved_before_last);
  EXPECT_EQ(device.counters().physical_used, s.arena_bytes) << "one arena, nothing else held";
}

TEST(PlannedAllocator, ShapesThatStartAlikeSwitchInTheArenaTheyShare) {
  // Each iteration first allocates three blocks of the same sizes whatever
  // its shape, and keeps them to its end (an input, a mask), so the shape
  // shows at the fourth request, with those blocks in the arena. The kept
  // plan of that shape takes over in the same arena: no device call once
  // both shapes are kept, and no two live blocks overlap.
  SimulatedDevice device;
  PlannedOptions options;
  options.solve_seconds = 0.2;  // a plan with its start pinned is seldom proven optimal
  PlannedAllocator a(simulated_upstream(device), AllocatorConfig::gpumem_defaults(), options);
  Overlaps overlaps;
  std::uint64_t calls = 0;
  for (int i = 0; i < 10; ++i) {
    a.step();
    if (i == 3) calls = device.counters().upstream_calls();
    std::vector<std::pair<void*, std::size_t>> inputs;
    for (std::size_t bytes : {std::size_t{4096}, std::size_t{200} << 10, std::size_t{512}}) {
      inputs.emplace_back(a.allocate(bytes), bytes);
      overlaps.add(inputs.back().first, bytes);
    }
    iteration(a, overlaps, nullptr, 0, 1 + i % 2);
    for (auto [p, bytes] : inputs) {
      overlaps.remove(p);
      a.deallocate(p, bytes);
    }
  }
  const PlannedStats s = a.planned_stats();
  EXPECT_EQ(s.recordings, 2u);
  EXPECT_EQ(s.shapes, 2u);
  EXPECT_EQ(s.shape_switches, 8u) << "every iteration after the second";
  EXPECT_EQ(device.counters().upstream_calls(), calls);
  EXPECT_EQ(s.planned, 3u + 8u * 83u) << "the second shape's first three, then every request after the recordings";
  EXPECT_EQ(s.missed + s.gap_filled, 0u) << "both plans place the first three alike";
}

TEST(PlannedAllocator, ANewShapeGivesBackTheGranulesOfTheArenaItDoesNotUse) {
  // Three shapes that start with the same input, each told apart at its
  // second request, with the input in the arena by then. Once shapes have
  // changed, arenas are mapped over virtual memory: at the third shape's
  // divergence the arena in force goes back except the granule the input
  // holds, instead of staying whole until the input is freed.
  SimulatedDevice device;
  PlannedAllocator a(simulated_upstream(device));
  const std::size_t granule = device.granularity();
  const std::size_t input = 4096;
  auto shape = [&](std::size_t mib, bool check_divergence) {
    void* in = a.allocate(input);
    std::vector<std::pair<void*, std::size_t>> blocks;
    for (int k = 0; k < 4; ++k) {
      const std::size_t bytes = (mib << 20) + std::size_t(k) * 4096;
      const std::size_t before = device.counters().physical_used;
      blocks.emplace_back(a.allocate(bytes), bytes);
      if (check_divergence && k == 0) {
        EXPECT_LT(device.counters().physical_used, before) << "the arena's unused granules went back";
        EXPECT_EQ(device.counters().physical_used, granule + (bytes + 255) / 256 * 256)
            << "the input's granule, and the new shape's first block from the device";
      }
    }
    for (auto [p, bytes] : blocks) a.deallocate(p, bytes);
    a.deallocate(in, input);
  };
  a.step();
  shape(10, false);  // recorded
  a.step();
  shape(10, false);  // planned: an arena of 40 MiB and more, one device allocation
  a.step();
  shape(12, false);  // a new shape: that arena goes back once the input is freed
  a.step();
  EXPECT_EQ(device.counters().physical_used % granule, 0u) << "the arena is mapped granules";
  shape(14, true);  // another new shape
  const PlannedStats s = a.planned_stats();
  EXPECT_EQ(s.recordings, 3u);
  EXPECT_EQ(s.shapes, 2u);
}

// The simulated device's virtual memory, whose unmap fails on demand (as
// CUDA's does when the synchronization before it reports a kernel's error).
class FailingUnmap final : public VirtualMemory {
 public:
  explicit FailingUnmap(SimulatedDevice& device) : device_(device) {}
  bool fail = false;
  int refused = 0;  // unmap calls refused
  std::size_t granularity() const noexcept override { return device_.granularity(); }
  std::uintptr_t reserve(std::size_t bytes) override { return device_.reserve(bytes); }
  void release(std::uintptr_t base, std::size_t bytes) override { device_.release(base, bytes); }
  void map(std::uintptr_t address, std::size_t bytes) override { device_.map(address, bytes); }
  void unmap(std::uintptr_t address, std::size_t bytes) override {
    if (fail) {
      ++refused;
      throw DeviceError("unmap: an earlier kernel failed");
    }
    device_.unmap(address, bytes);
  }
  std::size_t physical_capacity() const noexcept override { return device_.physical_capacity(); }

 private:
  SimulatedDevice& device_;
};

TEST(PlannedAllocator, ADeviceThatRefusesToUnmapLeavesTheArenaMappedAndNoCrash) {
  // Shapes change, so arenas are virtual; then the device refuses every
  // unmap: the arena a new shape gives back stays mapped (its blocks are
  // still served from memory that is there), and freeing it and the
  // allocator itself neither throws nor aborts.
  SimulatedDevice device({.backed = true});
  FailingUnmap vmm(device);
  Upstream upstream = simulated_upstream(device);
  upstream.vmm = &vmm;
  auto a = std::make_unique<PlannedAllocator>(upstream);
  const auto shape = [&](std::size_t mib) {
    void* in = a->allocate(4096);
    std::vector<std::pair<void*, std::size_t>> blocks;
    for (int k = 0; k < 4; ++k) {
      const std::size_t bytes = (mib << 20) + std::size_t(k) * 4096;
      blocks.emplace_back(a->allocate(bytes), bytes);
      std::memset(blocks.back().first, 1, bytes);
    }
    std::memset(in, 1, 4096);  // still mapped
    for (auto [p, bytes] : blocks) a->deallocate(p, bytes);
    a->deallocate(in, 4096);
  };
  for (std::size_t mib : {10, 10, 12}) {
    a->step();
    shape(mib);
  }
  a->step();
  vmm.fail = true;
  EXPECT_NO_THROW(shape(14));
  EXPECT_GT(vmm.refused, 0) << "the arena given back was virtual, and its unmap was refused";
  a->step();
  EXPECT_NO_THROW(a.reset());
}

TEST(PlannedAllocator, SmallRequestsFromTheDeviceShareChunks) {
  // A recorded iteration's requests under 512 bytes take 128-byte slots of
  // 4 KiB device chunks: forty 8-byte requests, kept past the iteration,
  // hold two chunks, and device_bytes says so.
  SimulatedDevice device;
  PlannedAllocator a(simulated_upstream(device));
  a.step();
  std::vector<void*> kept;
  for (int k = 0; k < 40; ++k) kept.push_back(a.allocate(8));
  EXPECT_EQ(a.planned_stats().device_bytes, 2u * 4096u);
  EXPECT_EQ(device.counters().physical_used, 2u * 4096u);
  for (void* p : kept) a.deallocate(p, 8);
  EXPECT_EQ(a.planned_stats().device_bytes, 0u);
  EXPECT_EQ(device.counters().physical_used, 0u);
}

TEST(PlannedAllocator, ARequestOffThePlanFindsAnAlignedGapBelowOneTooNarrowOnceAligned) {
  // Small planned blocks at [512, 640) and [1152, 1280): the gap between
  // them is 512 bytes wide, but a 512-byte request needs a multiple of 512,
  // which that gap does not hold; the gap at the bottom does. (One shape:
  // a request past the plan's end early on would be a new one.)
  SimulatedDevice device;
  PlannedOptions options;
  options.max_shapes = 0;
  PlannedAllocator a(simulated_upstream(device), AllocatorConfig::gpumem_defaults(), options);
  IterationPlan plan;
  plan.sizes = {100, 100};
  plan.offsets = {512, 1152};
  plan.arena = 1280;
  a.use_plan(plan);
  a.step();
  auto* first = static_cast<char*>(a.allocate(100));
  void* second = a.allocate(100);
  void* off_plan = a.allocate(512);
  EXPECT_EQ(a.planned_stats().planned, 2u);
  EXPECT_EQ(a.planned_stats().gap_filled, 1u);
  EXPECT_EQ(off_plan, first - 512) << "the arena's bottom";
  for (void* p : {static_cast<void*>(first), second}) a.deallocate(p, 100);
  a.deallocate(off_plan, 512);
}

TEST(PlannedAllocator, RequestsOnAnotherStreamAreNoPartOfThePlan) {
  // One request of each iteration goes to another stream, among the first
  // ones: the plan is of the first stream's requests alone, so the next
  // iterations follow it (no new shape, no plan made again).
  SimulatedDevice device;
  PlannedAllocator a(simulated_upstream(device));
  Overlaps overlaps;
  for (int i = 0; i < 5; ++i) {
    a.step();
    void* first = a.allocate(64 << 10);
    void* copy = a.allocate(1 << 20, StreamId{7});
    iteration(a, overlaps, nullptr);
    a.deallocate(copy, 1 << 20, StreamId{7});
    a.deallocate(first, 64 << 10);
  }
  const PlannedStats s = a.planned_stats();
  EXPECT_EQ(s.recordings, 1u);
  EXPECT_EQ(s.plans, 1u);
  EXPECT_EQ(s.planned, 4u * 81u);
  EXPECT_EQ(s.missed, 0u);
}

TEST(PlannedAllocator, ShapesThatNeverComeBackStopComingFromTheDevice) {
  // A new shape every iteration: each is recorded, at most max_shapes
  // plans are kept, and once max_from_device recorded requests came from
  // the device the rest go through the cache.
  SimulatedDevice device;
  PlannedOptions options;
  options.max_shapes = 3;
  options.max_from_device = 200;  // two and a half recordings
  PlannedAllocator a(simulated_upstream(device), AllocatorConfig::gpumem_defaults(), options);
  Overlaps overlaps;
  for (std::size_t i = 0; i < 8; ++i) {
    a.step();
    iteration(a, overlaps, nullptr, 0, i + 1);
  }
  const PlannedStats s = a.planned_stats();
  EXPECT_EQ(s.recordings, 8u);
  EXPECT_EQ(s.from_device, 200u);
  EXPECT_EQ(s.shapes, 3u);
  EXPECT_EQ(s.planned, 0u);
  EXPECT_EQ(s.device_bytes, 0u);
}

TEST(PlannedAllocator, AnIterationTooLongToObserveIsNotPlanned) {
  SimulatedDevice device;
  PlannedOptions options;
  options.max_observed = 50;  // the iteration makes 80 requests
  PlannedAllocator a(simulated_upstream(device), AllocatorConfig::gpumem_defaults(), options);
  Overlaps overlaps;
  for (int i = 0; i < 3; ++i) {
    a.step();
    iteration(a, overlaps, nullptr);
  }
  EXPECT_EQ(a.planned_stats().plans, 0u);
  EXPECT_EQ(a.planned_stats().planned, 0u);
  EXPECT_EQ(a.planned_stats().from_device, 50u) << "the first recording up to its overflow; the others use the cache";
}

TEST(PlannedAllocator, ACallerThatNeverStepsAgainIsNotServedFromTheDeviceForever) {
  SimulatedDevice device;
  PlannedOptions options;
  options.max_from_device = 100;
  PlannedAllocator a(simulated_upstream(device), AllocatorConfig::gpumem_defaults(), options);
  Overlaps overlaps;
  a.step();
  for (int i = 0; i < 5; ++i) iteration(a, overlaps, nullptr);  // 400 requests, one recording
  EXPECT_EQ(a.planned_stats().from_device, 100u);
  EXPECT_EQ(device.counters().physical_used, a.cache().stats().reserved_bytes[0].current);
}

TEST(PlannedAllocator, AnArenaTheDeviceCannotHoldLeavesTheCacheServing) {
  // A plan from a file whose arena does not fit: step() does not throw, the
  // cache serves the iteration, and the next step() plans what it observed.
  SimulatedDevice device({.capacity = 64 << 20});
  PlannedAllocator a(simulated_upstream(device));
  IterationPlan too_big;
  too_big.sizes = {1 << 20, 1 << 20};
  too_big.offsets = {0, 96 << 20};
  too_big.arena = 97 << 20;
  a.use_plan(too_big);
  for (int i = 0; i < 3; ++i) {
    ASSERT_NO_THROW(a.step());
    for (int k = 0; k < 2; ++k) {
      void* p = a.allocate(1 << 20);
      ASSERT_NE(p, nullptr);
      a.deallocate(p, 1 << 20);
    }
  }
  const PlannedStats s = a.planned_stats();
  EXPECT_EQ(s.arena_refused, 1u);
  EXPECT_EQ(s.plans, 1u) << "the second step plans the first iteration";
  EXPECT_EQ(s.arena_bytes, 1u << 20) << "one request at a time";
  EXPECT_EQ(s.planned, 4u) << "the second and third iterations come from the arena";
}

TEST(PlannedAllocator, APlanFromEarlierServesTheFirstIteration) {
  // Plan one iteration ahead of time (as `gpumem plan` over a recording).
  SimulatedDevice recording_device;
  PlannedAllocator recorder(simulated_upstream(recording_device));
  Overlaps o1;
  recorder.step();
  iteration(recorder, o1, nullptr);
  recorder.step();
  const IterationPlan plan = *recorder.plan();

  SimulatedDevice device;
  PlannedAllocator a(simulated_upstream(device));
  a.use_plan(plan);
  Overlaps o2;
  a.step();
  iteration(a, o2, nullptr);
  EXPECT_EQ(a.planned_stats().planned, 80u);
  EXPECT_EQ(a.planned_stats().plans, 0u) << "nothing recorded: the plan came from outside";
}

TEST(PlannedReplay, ARealTrainingTraceEndsFullyPlanned) {
  const trace::Trace t = trace::read_trace(test::trace_path("resnet18_adamw_3iter.json.gz"));
  trace::ReplayOptions options;
  options.policies = {"gpumem", "gpumem-planned"};
  options.optimal_time_limit = 0;
  const trace::ReplayReport r = trace::replay(t, options);
  EXPECT_EQ(r.iterations, 3u);
  ASSERT_EQ(r.policies.size(), 2u);
  const trace::PolicyResult& planned = r.policies[1];
  EXPECT_EQ(planned.name, "gpumem-planned");
  // Iteration 0 creates the optimizer state (186 allocations more, most of
  // what stays): set-up, so iteration 1 is recorded too, and its plan
  // serves all of iteration 2.
  ASSERT_TRUE(planned.plan.has_value());
  EXPECT_EQ(planned.plan->planned, 1409u);
  EXPECT_EQ(planned.plan->missed, 0u);
  EXPECT_GT(planned.steady_peak_reserved, 0);
  EXPECT_GE(planned.steady_peak_reserved, r.steady_peak_allocated);
  EXPECT_EQ(r.policies[0].steady_peak_reserved, r.policies[0].peak_reserved)
      << "gpumem's peak is in the iterations after the first";
}

TEST(PlannedReplay, RealTrainingTracesReserveWithinTwoPercentInSteadyState) {
  // Issue 17's goal on every bundled trace with iterations
  // (bench/planned_goals.sh): from the second iteration on, the most
  // reserved is within 2% of the most allocated. On the two-iteration
  // traces the second is a recording (the first sets up state), and on the
  // longer ones the later iterations come from the plan; resnet50's five
  // batches are five shapes, each recorded, and so are the encoder's
  // eight, each told apart after its input took the arena. The small
  // transformers make hundreds of requests of 4 to 256 bytes: at 512-byte
  // rounding they reserved 6% more than they allocate.
  for (const char* name : {"resnet18_train.json", "vit_b16_adamw_2iter.json.gz", "vit_b16_adamw_3iter.json.gz",
                           "leaky_mlp_train.json.gz", "resnet18_adamw_3iter.json.gz", "resnet50_infer_batches.json.gz",
                           "bert_infer_dynamic.json.gz", "transformer_train.json", "transformer_adam_4iter.json.gz"}) {
    SCOPED_TRACE(name);
    const trace::Trace t = trace::read_trace(test::trace_path(name));
    trace::ReplayOptions options;
    options.policies = {"gpumem-planned"};
    options.optimal_time_limit = 0;
    const trace::ReplayReport r = trace::replay(t, options);
    ASSERT_GE(r.iterations, 2u);
    ASSERT_GT(r.steady_peak_allocated, 0);
    if (r.iterations >= 3 && std::string(name).find("infer") == std::string::npos)
      EXPECT_GT(r.policies[0].plan.value().planned, 0u);
    EXPECT_LE(static_cast<double>(r.policies[0].steady_peak_reserved),
              1.02 * static_cast<double>(r.steady_peak_allocated));
  }
}

}  // namespace
}  // namespace gpumem::alloc

#include <fstream>

#include "gpumem/common/error.h"
#include "gpumem/trace/iteration_plan.h"
#include "gpumem/trace/lifetimes.h"

namespace gpumem::alloc {
namespace {

TEST(IterationPlan, SmallRequestsTake128BytesAndTheRest512AroundThePinnedOnes) {
  // Random iterations of small (under 512 bytes) and larger requests, the
  // first few pinned where an arena served them: every planned offset is a
  // multiple of 128 for a small request and of 512 for the others, pinned
  // ones stay, requests alive at once never overlap, and all fit the arena.
  std::mt19937_64 random(3);
  for (int round = 0; round < 200; ++round) {
    SCOPED_TRACE(round);
    const std::size_t n = 2 + random() % 60;
    std::vector<std::size_t> sizes(n);
    std::vector<std::int64_t> born(n), died(n), pinned(n, -1);
    for (std::size_t k = 0; k < n; ++k) {
      sizes[k] = random() % 2 ? 1 + random() % 511 : 512 + random() % 20000;
      born[k] = static_cast<std::int64_t>(2 * k);
      died[k] = random() % 10 == 0 ? -1 : born[k] + 1 + static_cast<std::int64_t>(random() % (2 * n));
    }
    // The first two pinned side by side, as an arena would have served them.
    if (random() % 2) {
      pinned[0] = 0;
      const auto round = [](std::size_t bytes, std::size_t to) { return (bytes + to - 1) / to * to; };
      const std::size_t taken = round(sizes[0], sizes[0] < 512 ? 128 : 512);  // as the plan rounds it
      pinned[1] = static_cast<std::int64_t>(round(taken, sizes[1] < 512 ? 128 : 512));
      died[0] = std::max<std::int64_t>(died[0], born[0] + 1);
      died[1] = std::max<std::int64_t>(died[1], born[1] + 1);
    }
    const IterationPlan plan = plan_iteration(sizes, born, died, 0.05, &pinned);
    ASSERT_EQ(plan.offsets.size(), n);
    for (std::size_t k = 0; k < n; ++k) {
      if (died[k] < 0) {
        EXPECT_EQ(plan.offsets[k], -1) << "outlives the iteration: not in the arena";
        continue;
      }
      const std::int64_t at = plan.offsets[k];
      ASSERT_GE(at, 0);
      EXPECT_EQ(at % (sizes[k] < 512 ? 128 : 512), 0) << "request " << k << " of " << sizes[k] << " bytes";
      if (pinned[k] >= 0) EXPECT_EQ(at, pinned[k]);
      EXPECT_LE(at + static_cast<std::int64_t>(sizes[k]), static_cast<std::int64_t>(plan.arena));
      for (std::size_t j = 0; j < k; ++j) {
        if (died[j] < 0 || born[j] >= died[k] || born[k] >= died[j]) continue;
        const std::int64_t other = plan.offsets[j];
        EXPECT_TRUE(at + static_cast<std::int64_t>(sizes[k]) <= other ||
                    other + static_cast<std::int64_t>(sizes[j]) <= at)
            << "requests " << j << " and " << k << " overlap";
      }
    }
  }
}

TEST(IterationPlan, PinnedSmallRequestsNextToAPinnedLargerOneKeepTheirPlaces) {
  // The 512-byte stretches of two pinned small requests meet, and together
  // they would meet the pinned 512-byte request, which neither does alone:
  // the plan is made in one pass and keeps every pinned place.
  const std::vector<std::size_t> sizes = {100, 256, 512, 1024};
  const std::vector<std::int64_t> born = {0, 3, 0, 1}, died = {5, 10, 3, 4}, pinned = {0, 384, 512, -1};
  const IterationPlan plan = plan_iteration(sizes, born, died, 0.05, &pinned);
  EXPECT_EQ(plan.offsets[0], 0);
  EXPECT_EQ(plan.offsets[1], 384);
  EXPECT_EQ(plan.offsets[2], 512);
  EXPECT_EQ(plan.offsets[3], 1024) << "above all three, which it meets";
}

TEST(IterationPlanFile, RoundTripsAndRefusesWhatItCannotTrust) {
  IterationPlan p;
  p.sizes = {1000, 4096, 7};
  p.offsets = {0, 1024, -1};
  p.arena = 5120;
  p.proven_optimal = true;
  const IterationPlan back = iteration_plan_from_json(to_json(p), "p.json");
  EXPECT_EQ(back.sizes, p.sizes);
  EXPECT_EQ(back.offsets, p.offsets);
  EXPECT_EQ(back.arena, p.arena);
  EXPECT_TRUE(back.proven_optimal);
  const auto error = [](const std::string& text) {
    try {
      iteration_plan_from_json(text, "p.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string head = R"({"format":"gpumem-iteration-plan","version":1,"arena_bytes":4096,"requests":)";
  EXPECT_EQ(error("[1,2]"), "p.json: not a JSON object");
  EXPECT_EQ(error(head + "[[0,0]]}"), "p.json: request 0: size 0 is not 1 to 2^50 bytes");
  EXPECT_EQ(error(head + "[[512,100]]}"),
            "p.json: request 0: offset 100 is not -1 or a multiple of 512 that fits the arena");
  EXPECT_EQ(error(head + "[[4096,512]]}"),
            "p.json: request 0: offset 512 is not -1 or a multiple of 512 that fits the arena");
  EXPECT_EQ(error(head + "[[1]]}"), "p.json: request 0: not [size, offset]");
  EXPECT_EQ(error(R"({"format":"x"})"), "p.json: \"format\" is not \"gpumem-iteration-plan\"");
  EXPECT_EQ(error(R"({"format":"gpumem-iteration-plan","version":3})"), "p.json: \"version\" is not 1 or 2");
  EXPECT_EQ(error(R"({"format":1})"), "p.json: \"format\" is not \"gpumem-iteration-plan\"");
  EXPECT_EQ(error(head + "[[100,64]]}"),
            "p.json: request 0: offset 64 is not -1 or a multiple of 128 that fits the arena");
  EXPECT_EQ(error(head + "[[1,9223372036854775296]]}"),
            "p.json: request 0: offset 9223372036854775296 is not -1 or a multiple of 128 that fits the arena")
      << "no overflow when the offset is near 2^63";
  IterationPlan mismatched;
  mismatched.sizes = {512};
  EXPECT_THROW(PlannedAllocator(simulated_upstream(*std::make_unique<SimulatedDevice>())).use_plan(mismatched),
               InputError);
}

TEST(IterationPlanFile, ATracesPlanServesAJobsFirstIteration) {
  // `gpumem trace plan` over a recorded training trace, then a job that
  // loads it before its first iteration: the first iteration already comes
  // from the arena (it allocates a little more than the planned one).
  const trace::Trace t = trace::read_trace(test::trace_path("resnet18_adamw_3iter.json.gz"));
  const trace::Lifetimes l = trace::extract_lifetimes(t, trace::busiest_device(t), false);
  const trace::TracePlan tp = trace::plan_last_iteration(l, "resnet18", 2);
  EXPECT_EQ(tp.iterations, 3u);
  EXPECT_EQ(tp.plan.sizes.size(), 1409u);
  const IterationPlan plan = iteration_plan_from_json(to_json(tp.plan), "plan.json");

  SimulatedDevice device;
  PlannedAllocator a(simulated_upstream(device), parse_allocator_config("expandable_segments:true"));
  a.use_plan(plan);
  const trace::IterationSplit split = trace::find_iterations(l);
  std::vector<std::pair<std::size_t, std::size_t>> steps;  // event, allocation * 2 + free
  for (std::size_t i = 0; i < l.allocations.size(); ++i) {
    steps.push_back({l.allocations[i].alloc_event, 2 * i});
    if (l.allocations[i].free_event != trace::kNeverFreed) steps.push_back({l.allocations[i].free_event, 2 * i + 1});
  }
  std::sort(steps.begin(), steps.end());
  std::vector<void*> p(l.allocations.size(), nullptr);
  std::uint64_t planned_in_first = 0;
  std::int64_t allocated = 0, peak_allocated = 0;
  for (const auto& [event, code] : steps) {
    const std::size_t i = code / 2;
    if (code % 2 == 0) {
      if (i == split.starts[0]) a.step();
      if (i == split.starts[1]) planned_in_first = a.planned_stats().planned + a.planned_stats().gap_filled;
      p[i] = a.allocate(static_cast<std::size_t>(l.allocations[i].size));
      allocated += l.allocations[i].size;
      peak_allocated = std::max(peak_allocated, allocated);
    } else {
      a.deallocate(p[i], static_cast<std::size_t>(l.allocations[i].size));
      allocated -= l.allocations[i].size;
    }
  }
  EXPECT_GT(planned_in_first, 1300u) << "the first iteration came from the arena";
  // Planned from the start, the whole run reserves within 2% of the most it
  // ever has allocated: what stays (AdamW's state, allocated in the first
  // iteration) fills gaps of the arena instead of segments of its own.
  EXPECT_LE(static_cast<double>(device.counters().physical_peak), 1.02 * static_cast<double>(peak_allocated));
}

}  // namespace
}  // namespace gpumem::alloc
