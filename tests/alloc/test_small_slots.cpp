// Planned mode's small requests: 128-byte slots in 4 KiB device chunks,
// first fit, a chunk given back when its last slot is freed; checked against
// a model of the slots on random workloads.
#include "alloc/small_slots.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

#include "gpumem/alloc/caching_allocator.h"
#include "gpumem/alloc/simulated_device.h"

namespace gpumem::alloc::detail {
namespace {

TEST(SmallSlots, RequestsShareAChunkAtSlotBoundaries) {
  SimulatedDevice device;
  SmallSlots slots(simulated_upstream(device).memory, kDefaultStream);
  auto* a = static_cast<char*>(slots.allocate(4));
  auto* b = static_cast<char*>(slots.allocate(200));  // two slots
  auto* c = static_cast<char*>(slots.allocate(128));
  EXPECT_EQ(b - a, 128);
  EXPECT_EQ(c - a, 384);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % SmallSlots::kSlot, 0u);
  EXPECT_EQ(device.counters().physical_used, SmallSlots::kChunk) << "one device allocation for the three";
  slots.free(b, 200);
  EXPECT_EQ(slots.allocate(256), b) << "first fit takes the hole";
  slots.free(a, 4);
  slots.free(b, 256);
  slots.free(c, 128);
  EXPECT_EQ(device.counters().physical_used, 0u) << "an empty chunk goes back";
  EXPECT_EQ(slots.device_bytes(), 0u);
}

TEST(SmallSlots, RandomWorkloadsNeverOverlapAndHoldNoEmptyChunk) {
  SimulatedDevice device;
  std::mt19937_64 random(17);
  SmallSlots slots(simulated_upstream(device).memory, kDefaultStream);
  std::map<std::uintptr_t, std::size_t> live;  // address -> bytes
  for (int round = 0; round < 20; ++round) {
    for (int step = 0; step < 2000; ++step) {
      if (live.empty() || random() % 3 != 0) {
        const std::size_t bytes = 1 + random() % SmallSlots::kLargest;
        const auto p = reinterpret_cast<std::uintptr_t>(slots.allocate(bytes));
        ASSERT_EQ(p % SmallSlots::kSlot, 0u);
        auto next = live.lower_bound(p);
        if (next != live.end()) ASSERT_GE(next->first, p + bytes);
        if (next != live.begin()) ASSERT_LE(std::prev(next)->first + std::prev(next)->second, p);
        live[p] = bytes;
      } else {
        auto it = live.begin();
        std::advance(it, static_cast<long>(random() % live.size()));
        slots.free(reinterpret_cast<void*>(it->first), it->second);
        live.erase(it);
      }
      // No more chunks than live blocks (none held empty), and room for
      // every live block's slots.
      std::size_t slot_bytes = 0;
      for (const auto& [p, bytes] : live)
        slot_bytes += (bytes + SmallSlots::kSlot - 1) / SmallSlots::kSlot * SmallSlots::kSlot;
      ASSERT_LE(slots.device_bytes(), live.size() * SmallSlots::kChunk);
      ASSERT_GE(slots.device_bytes(), slot_bytes);
      ASSERT_EQ(device.counters().physical_used, slots.device_bytes());
    }
    // Half the rounds end with everything freed: nothing stays on the device.
    if (round % 2 == 0) {
      for (const auto& [p, bytes] : live) slots.free(reinterpret_cast<void*>(p), bytes);
      live.clear();
      ASSERT_EQ(device.counters().physical_used, 0u);
    }
  }
}

}  // namespace
}  // namespace gpumem::alloc::detail
