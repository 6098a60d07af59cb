// The simulated GPU: capacity, address reuse, granule mapping, events.
#include <cstring>

#include <gtest/gtest.h>

#include "gpumem/alloc/simulated_device.h"

namespace gpumem::alloc {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

TEST(SimulatedDevice, AllocatesAlignedAddressesWithinCapacity) {
  SimulatedDevice device({.capacity = 64 * kMiB});
  void* a = device.allocate(1000);
  void* b = device.allocate(3 * kMiB);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % kDeviceAlignment, 0u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b) % (2 * kMiB), 0u);  // large ones on 2 MiB, as cudaMalloc
  EXPECT_EQ(device.counters().physical_used, 1024 + 3 * kMiB);
  EXPECT_THROW(device.allocate(61 * kMiB), OutOfMemoryError);
  EXPECT_EQ(device.counters().failed_calls, 1u);
  device.deallocate(b, 3 * kMiB);
  void* c = device.allocate(3 * kMiB);
  EXPECT_EQ(c, b);  // returned address space is reused
  device.deallocate(a, 1000);
  device.deallocate(c, 3 * kMiB);
  SimulatedDeviceCounters n = device.counters();
  EXPECT_EQ(n.physical_used, 0u);
  EXPECT_EQ(n.physical_peak, 1024 + 3 * kMiB);
  EXPECT_EQ(n.allocate_calls, 4u);
  EXPECT_EQ(n.deallocate_calls, 3u);
}

TEST(SimulatedDevice, MapsGranulesAndChargesThem) {
  SimulatedDevice device({.capacity = 8 * kMiB});
  std::uintptr_t base = device.reserve(64 * kMiB);  // address space beyond capacity is fine
  EXPECT_EQ(base % (2 * kMiB), 0u);
  device.map(base, 4 * kMiB);
  device.map(base + 6 * kMiB, 2 * kMiB);
  EXPECT_EQ(device.counters().physical_used, 6 * kMiB);
  EXPECT_THROW(device.map(base + 8 * kMiB, 4 * kMiB), OutOfMemoryError);
  EXPECT_THROW(device.map(base, 2 * kMiB), DeviceError);          // already mapped
  EXPECT_THROW(device.map(base + 1, 2 * kMiB), DeviceError);      // misaligned
  EXPECT_THROW(device.unmap(base + 4 * kMiB, 2 * kMiB), DeviceError);  // not mapped
  EXPECT_THROW(device.release(base, 64 * kMiB), DeviceError);     // still mapped
  device.unmap(base, 2 * kMiB);
  device.unmap(base + 2 * kMiB, 2 * kMiB);
  device.unmap(base + 6 * kMiB, 2 * kMiB);
  device.release(base, 64 * kMiB);
  SimulatedDeviceCounters n = device.counters();
  EXPECT_EQ(n.physical_used, 0u);
  EXPECT_EQ(n.map_calls, 2u);  // refused maps are not counted
  EXPECT_EQ(n.unmap_calls, 3u);
  EXPECT_EQ(n.reserved_address_bytes, 0u);
}

TEST(SimulatedDevice, BackedMemoryCanBeWrittenThroughMappings) {
  SimulatedDevice device({.capacity = 16 * kMiB, .backed = true});
  auto* p = static_cast<unsigned char*>(device.allocate(5000));
  std::memset(p, 0xab, 5000);
  EXPECT_EQ(p[4999], 0xab);
  device.deallocate(p, 5000);
  std::uintptr_t base = device.reserve(8 * kMiB);
  device.map(base + 2 * kMiB, 2 * kMiB);
  auto* q = reinterpret_cast<unsigned char*>(base + 2 * kMiB);
  std::memset(q, 7, 2 * kMiB);
  EXPECT_EQ(q[2 * kMiB - 1], 7);
  device.unmap(base + 2 * kMiB, 2 * kMiB);
  device.release(base, 8 * kMiB);
}

TEST(SimulatedDevice, EventsWaitForWorkQueuedBeforeThem) {
  SimulatedDevice device;
  device.launch(1);
  auto e = device.record(1);
  device.launch(1);
  auto later = device.record(1);
  EXPECT_FALSE(device.query(e));
  device.synchronize(e);
  EXPECT_TRUE(device.query(e));
  EXPECT_FALSE(device.query(later));
  device.complete(1);
  EXPECT_TRUE(device.query(later));
  auto idle = device.record(2);  // nothing queued on stream 2
  EXPECT_TRUE(device.query(idle));
  device.destroy(e);
  EXPECT_THROW(device.query(e), DeviceError);
}

TEST(SimulatedDevice, ModelsCallLatency) {
  SimulatedDevice device({.call_latency_ns = 5000});
  void* p = device.allocate(100);
  device.deallocate(p, 100);
  EXPECT_EQ(device.simulated_time_ns(), 10000u);
}

}  // namespace
}  // namespace gpumem::alloc
