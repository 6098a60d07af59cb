// TensorFlow's BFC allocator and RMM's pool resource, on the simulated GPU:
// the behaviours their sources define (rounding, bins and best fit, split
// rules, region and pool growth, coalescing, per-stream lists), then a long
// random run of each against a reference of live ranges.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gpumem/alloc/policies/bfc_allocator.h"
#include "gpumem/alloc/policies/pool_resource.h"
#include "gpumem/alloc/simulated_device.h"
#include "gpumem/common/error.h"

namespace gpumem::alloc {
namespace {

constexpr std::size_t kKiB = std::size_t{1} << 10;
constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kGiB = std::size_t{1} << 30;

std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

std::string oom_message(MemoryResource& r, std::size_t bytes, StreamId stream = kDefaultStream) {
  try {
    void* p = r.allocate(bytes, stream);
    r.deallocate(p, bytes, stream);
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.requested_bytes(), bytes);
    return e.what();
  }
  ADD_FAILURE() << "allocating " << bytes << " bytes did not fail";
  return "";
}

// ---------------------------------------------------------------- BFC ----

TEST(Bfc, RoundsTo256AndCarvesInAddressOrder) {
  SimulatedDevice device({.capacity = kGiB});
  BfcAllocator bfc(device, {.memory_limit = kGiB});
  EXPECT_EQ(bfc.name(), "bfc");
  EXPECT_EQ(BfcAllocator::rounded_bytes(1), 256u);
  EXPECT_EQ(BfcAllocator::rounded_bytes(256), 256u);
  EXPECT_EQ(BfcAllocator::rounded_bytes(257), 512u);
  EXPECT_EQ(bfc.allocate(0), nullptr);

  void* a = bfc.allocate(1);
  void* b = bfc.allocate(1000);
  void* c = bfc.allocate(257);
  EXPECT_EQ(address(a) % 256, 0u);
  EXPECT_EQ(address(b), address(a) + 256);
  EXPECT_EQ(address(c), address(b) + 1024);
  EXPECT_EQ(bfc.stats().bytes_in_use, 256u + 1024u + 512u);
  // One 2 MiB region serves them all.
  EXPECT_EQ(device.counters().allocate_calls, 1u);
  EXPECT_EQ(device.counters().physical_used, 2 * kMiB);
  bfc.deallocate(a, 1);
  bfc.deallocate(b, 1000);
  bfc.deallocate(c, 257);
  EXPECT_EQ(bfc.stats().bytes_in_use, 0u);
  EXPECT_EQ(bfc.stats().peak_bytes_in_use, 256u + 1024u + 512u);
}

TEST(Bfc, RegionsDoubleFromTwoMiB) {
  SimulatedDevice device({.capacity = kGiB});
  BfcAllocator bfc(device, {.memory_limit = kGiB});
  const std::size_t r = 3 * kMiB / 2;
  bfc.allocate(r);  // region 2 MiB, not split (2 < 2 * 1.5): the whole 2 MiB
  bfc.allocate(r);  // region 4 MiB, split: 2.5 MiB stays free
  bfc.allocate(r);  // takes the 2.5 MiB whole (2.5 < 3)
  bfc.allocate(r);  // region 8 MiB
  EXPECT_EQ(bfc.region_sizes(), (std::vector<std::size_t>{2 * kMiB, 4 * kMiB, 8 * kMiB}));
  EXPECT_EQ(device.counters().allocate_calls, 3u);
  EXPECT_EQ(device.counters().physical_used, 14 * kMiB);
  EXPECT_EQ(bfc.stats().bytes_in_use, 2 * kMiB + r + 5 * kMiB / 2 + r);
  EXPECT_EQ(bfc.stats().pool_bytes, 14 * kMiB);

  // 20 MiB exceeds the next size (16 MiB): doubled to 32 MiB, and because
  // that region needed the doubling, the one after is 32 MiB again.
  bfc.allocate(20 * kMiB);
  bfc.allocate(20 * kMiB);
  EXPECT_EQ(bfc.region_sizes(), (std::vector<std::size_t>{2 * kMiB, 4 * kMiB, 8 * kMiB, 32 * kMiB, 32 * kMiB}));
  bfc.allocate(40 * kMiB);  // and then 64 MiB
  EXPECT_EQ(bfc.region_sizes().back(), 64 * kMiB);
}

TEST(Bfc, OldTensorflowFirstRegionOfOneMiB) {
  SimulatedDevice device({.capacity = kGiB});
  BfcAllocator bfc(device, {.memory_limit = kGiB, .initial_region_bytes = kMiB});
  bfc.allocate(100);
  bfc.allocate(kMiB);
  EXPECT_EQ(bfc.region_sizes(), (std::vector<std::size_t>{kMiB, 2 * kMiB}));
}

TEST(Bfc, WithoutGrowthTakesTheWholeLimitOnce) {
  SimulatedDevice device({.capacity = kGiB});
  BfcAllocator bfc(device, {.memory_limit = 8 * kMiB, .allow_growth = false});
  EXPECT_EQ(device.counters().allocate_calls, 0u);  // lazily, at the first request
  void* a = bfc.allocate(1);
  EXPECT_EQ(bfc.region_sizes(), (std::vector<std::size_t>{8 * kMiB}));
  EXPECT_EQ(device.counters().physical_used, 8 * kMiB);
  void* b = bfc.allocate(7 * kMiB);
  EXPECT_EQ(device.counters().allocate_calls, 1u);
  EXPECT_NE(oom_message(bfc, kMiB).find("ran out of memory"), std::string::npos);
  bfc.deallocate(a, 1);
  bfc.deallocate(b, 7 * kMiB);
}

TEST(Bfc, MemoryLimitDefaultsToTheDevicesCapacity) {
  SimulatedDevice device({.capacity = 64 * kMiB});
  BfcAllocator bfc(device, {.allow_growth = false});
  bfc.allocate(1);
  EXPECT_EQ(bfc.stats().bytes_limit, 64 * kMiB);
  EXPECT_EQ(bfc.region_sizes(), (std::vector<std::size_t>{64 * kMiB}));
}

TEST(Bfc, BestFitAcrossBins) {
  SimulatedDevice device({.capacity = kGiB});
  BfcAllocator bfc(device, {.memory_limit = 256 * kMiB, .allow_growth = false});
  // Free chunks of 64, 16, 24, 40 and 16 KiB, kept apart by live 4 KiB
  // separators, then the rest of the region.
  std::vector<std::size_t> sizes = {64 * kKiB, 16 * kKiB, 24 * kKiB, 40 * kKiB, 16 * kKiB};
  std::vector<void*> holes;
  for (std::size_t s : sizes) {
    holes.push_back(bfc.allocate(s));
    bfc.allocate(4 * kKiB);
  }
  for (std::size_t i = 0; i < holes.size(); ++i) bfc.deallocate(holes[i], sizes[i]);

  // 20 KiB: bin [16, 32) KiB holds 16, 16 and 24; the 24 KiB chunk is the
  // first that fits, and it is not split (24 < 2 * 20).
  EXPECT_EQ(bfc.allocate(20 * kKiB), holes[2]);
  // 28 KiB: nothing in its bin fits any more; the next bin's 40 KiB does.
  EXPECT_EQ(bfc.allocate(28 * kKiB), holes[3]);
  // 16 KiB: two equal chunks; the lower address wins.
  EXPECT_EQ(bfc.allocate(16 * kKiB), holes[1]);
  EXPECT_EQ(bfc.allocate(16 * kKiB), holes[4]);
  // 1 KiB: the smallest free chunk left is the 64 KiB one, split.
  EXPECT_EQ(bfc.allocate(kKiB), holes[0]);
  EXPECT_EQ(bfc.allocate(kKiB), static_cast<char*>(holes[0]) + kKiB);
  EXPECT_EQ(device.counters().allocate_calls, 1u);
}

TEST(Bfc, SplitRule) {
  SimulatedDevice device({.capacity = 4 * kGiB});
  {
    BfcAllocator bfc(device, {.memory_limit = kGiB, .initial_region_bytes = kMiB});
    // 1000 bytes in a 1 MiB chunk: at least twice the size, split.
    void* a = bfc.allocate(1000);
    std::vector<BfcChunk> chunks = bfc.chunks();
    ASSERT_EQ(chunks.size(), 2u);
    EXPECT_EQ(chunks[0].size, 1024u);
    EXPECT_TRUE(chunks[0].in_use);
    EXPECT_EQ(chunks[1].size, kMiB - 1024);
    EXPECT_FALSE(chunks[1].in_use);
    bfc.deallocate(a, 1000);
    EXPECT_EQ(bfc.chunks().size(), 1u);  // coalesced again

    // 600 KiB in the 1 MiB chunk: less than twice, remainder under 128 MiB:
    // the caller gets the whole MiB.
    void* b = bfc.allocate(600 * kKiB);
    ASSERT_EQ(bfc.chunks().size(), 1u);
    EXPECT_EQ(bfc.stats().bytes_in_use, kMiB);
    bfc.deallocate(b, 600 * kKiB);
    // 512 KiB: exactly half, split.
    void* c = bfc.allocate(512 * kKiB);
    EXPECT_EQ(bfc.chunks().size(), 2u);
    bfc.deallocate(c, 512 * kKiB);
  }
  {
    // The 128 MiB cap: 600 MiB of a 1 GiB chunk leaves 424 MiB, split;
    // 900 MiB leaves 124 MiB, not split.
    BfcAllocator bfc(device, {.memory_limit = kGiB, .allow_growth = false});
    void* a = bfc.allocate(600 * kMiB);
    EXPECT_EQ(bfc.chunks().size(), 2u);
    bfc.deallocate(a, 600 * kMiB);
    void* b = bfc.allocate(900 * kMiB);
    EXPECT_EQ(bfc.chunks().size(), 1u);
    EXPECT_EQ(bfc.stats().bytes_in_use, kGiB);
    bfc.deallocate(b, 900 * kMiB);
  }
  {
    // fragmentation_fraction 0.05 of 1 GiB: the cap is 51.2 MiB, so 900 MiB
    // is split.
    BfcAllocator bfc(device, {.memory_limit = kGiB, .allow_growth = false, .fragmentation_fraction = 0.05});
    void* b = bfc.allocate(900 * kMiB);
    EXPECT_EQ(bfc.chunks().size(), 2u);
    bfc.deallocate(b, 900 * kMiB);
  }
}

TEST(Bfc, CoalescesNeighboursWithinARegion) {
  SimulatedDevice device({.capacity = kGiB});
  BfcAllocator bfc(device, {.memory_limit = kGiB});
  const std::size_t q = 512 * kKiB;
  void* x = bfc.allocate(q);
  void* y = bfc.allocate(q);
  void* z = bfc.allocate(q);
  void* w = bfc.allocate(q);  // the 2 MiB region is full
  ASSERT_EQ(bfc.region_sizes().size(), 1u);
  bfc.deallocate(y, q);
  bfc.deallocate(x, q);
  bfc.deallocate(z, q);
  std::vector<BfcChunk> chunks = bfc.chunks();
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0].address, address(x));
  EXPECT_EQ(chunks[0].size, 3 * q);
  EXPECT_FALSE(chunks[0].in_use);
  // The three freed chunks serve one larger request without growing.
  EXPECT_EQ(bfc.allocate(3 * q), x);
  EXPECT_EQ(device.counters().allocate_calls, 1u);
  bfc.deallocate(w, q);
}

TEST(Bfc, NeverCoalescesAcrossRegions) {
  SimulatedDevice device({.capacity = kGiB});
  BfcAllocator bfc(device, {.memory_limit = kGiB});
  void* a = bfc.allocate(2 * kMiB);  // region 2 MiB
  void* b = bfc.allocate(4 * kMiB);  // region 4 MiB, right after it on this device
  EXPECT_EQ(address(b), address(a) + 2 * kMiB);
  bfc.deallocate(a, 2 * kMiB);
  bfc.deallocate(b, 4 * kMiB);
  EXPECT_EQ(bfc.chunks().size(), 2u);
  bfc.allocate(6 * kMiB);  // needs a third region
  EXPECT_EQ(device.counters().allocate_calls, 3u);
  EXPECT_EQ(bfc.stats().regions, 3u);
}

TEST(Bfc, OutOfMemoryAtTheLimit) {
  SimulatedDevice device({.capacity = kGiB});
  BfcAllocator bfc(device, {.memory_limit = 8 * kMiB});
  bfc.allocate(2 * kMiB);  // region 2 MiB
  bfc.allocate(4 * kMiB);  // region 4 MiB
  bfc.allocate(2 * kMiB);  // the 8 MiB region is capped to the 2 MiB left
  EXPECT_EQ(bfc.region_sizes(), (std::vector<std::size_t>{2 * kMiB, 4 * kMiB, 2 * kMiB}));
  const std::string m = oom_message(bfc, 1);
  EXPECT_NE(m.find("Allocator (bfc) ran out of memory trying to allocate 1 B (rounded to 256)"), std::string::npos)
      << m;
  EXPECT_NE(m.find("in use 8.00 MiB"), std::string::npos) << m;
  EXPECT_NE(m.find("limit 8.00 MiB"), std::string::npos) << m;
  EXPECT_EQ(device.counters().allocate_calls, 3u);  // the limit refuses before the device is asked
  EXPECT_NE(oom_message(bfc, 9 * kMiB).find("ran out of memory"), std::string::npos);
}

TEST(Bfc, BacksOffByNinetyPercentWhenTheDeviceRefuses) {
  SimulatedDevice device({.capacity = 10 * kMiB});
  BfcAllocator bfc(device, {.memory_limit = kGiB});
  bfc.allocate(kMiB);      // region 2 MiB
  bfc.allocate(3 * kMiB);  // region 4 MiB; the device has 4 MiB left
  // The next region would be 8 MiB: TF retries at 0.9x (in float, rounded
  // to 256) until the device agrees or the size drops below the request.
  std::size_t expected = 8 * kMiB;
  std::uint64_t refusals = 0;
  while (expected > 4 * kMiB) {
    expected = BfcAllocator::rounded_bytes(static_cast<std::size_t>(static_cast<float>(expected) * 0.9f));
    ++refusals;
  }
  bfc.allocate(3 * kMiB);
  EXPECT_EQ(bfc.region_sizes().back(), expected);
  EXPECT_GE(expected, 3 * kMiB);
  EXPECT_EQ(device.counters().failed_calls, refusals);

  const std::string m = oom_message(bfc, 5 * kMiB);
  EXPECT_NE(m.find("last upstream failure: simulated device: cannot allocate"), std::string::npos) << m;
}

TEST(Bfc, TinyRequestOnAFullDeviceFailsInsteadOfRetryingForever) {
  SimulatedDevice device({.capacity = 2 * kMiB});
  BfcAllocator bfc(device, {.memory_limit = kGiB});
  bfc.allocate(2 * kMiB);
  EXPECT_NE(oom_message(bfc, 1).find("ran out of memory"), std::string::npos);
}

TEST(Bfc, IgnoresStreams) {
  SimulatedDevice device({.capacity = kGiB});
  BfcAllocator bfc(device, {.memory_limit = kGiB});
  void* a = bfc.allocate(kMiB, 1);
  bfc.deallocate(a, kMiB, 2);
  EXPECT_EQ(bfc.allocate(kMiB, 3), a);
}

TEST(Bfc, ThreadSafe) {
  SimulatedDevice device({.capacity = 4 * kGiB});
  BfcAllocator bfc(device, {.memory_limit = 4 * kGiB});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&bfc, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::vector<std::pair<void*, std::size_t>> mine;
      for (int i = 0; i < 2000; ++i) {
        if (mine.empty() || rng() % 2 == 0) {
          std::size_t s = 1 + rng() % (4 * kMiB);
          mine.emplace_back(bfc.allocate(s), s);
        } else {
          bfc.deallocate(mine.back().first, mine.back().second);
          mine.pop_back();
        }
      }
      for (auto& [p, s] : mine) bfc.deallocate(p, s);
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(bfc.stats().bytes_in_use, 0u);
  EXPECT_EQ(bfc.chunks().size(), bfc.region_sizes().size());
}

TEST(BfcDeathTest, UnknownPointerAborts) {
  SimulatedDevice device({.capacity = kGiB});
  BfcAllocator bfc(device, {.memory_limit = kGiB});
  int x = 0;
  EXPECT_DEATH(bfc.deallocate(&x, 4), "not a live allocation");
}

TEST(Bfc, GivesRegionsBackOnDestruction) {
  SimulatedDevice device({.capacity = kGiB});
  {
    BfcAllocator bfc(device, {.memory_limit = kGiB});
    bfc.allocate(5 * kMiB);
    bfc.allocate(50 * kMiB);
    EXPECT_EQ(device.counters().live_allocations, 2u);
  }
  EXPECT_EQ(device.counters().live_allocations, 0u);
  EXPECT_EQ(device.counters().physical_used, 0u);
}

// --------------------------------------------------------------- pool ----

TEST(Pool, TakesTheInitialSizeUpFront) {
  SimulatedDevice device({.capacity = kGiB});
  PoolResource pool(device, {.initial_pool_size = 64 * kMiB});
  EXPECT_EQ(pool.name(), "rmm-pool");
  EXPECT_EQ(device.counters().allocate_calls, 1u);
  EXPECT_EQ(device.counters().physical_used, 64 * kMiB);
  EXPECT_EQ(pool.pool_size(), 64 * kMiB);
  std::vector<void*> ps;
  for (int i = 0; i < 64; ++i) ps.push_back(pool.allocate(kMiB));
  EXPECT_EQ(device.counters().allocate_calls, 1u);
  for (void* p : ps) pool.deallocate(p, kMiB);
  EXPECT_EQ(pool.free_list(kDefaultStream).size(), 1u);

  EXPECT_THROW(PoolResource(device, {.initial_pool_size = 1000}), InputError);
  EXPECT_THROW(PoolResource(device, {.initial_pool_size = 0, .maximum_pool_size = 1000}), InputError);
  EXPECT_THROW(PoolResource(device, {.initial_pool_size = 2 * kMiB, .maximum_pool_size = kMiB}), InputError);
  EXPECT_THROW(PoolResource(device, {.initial_pool_size = 2 * kGiB}), OutOfMemoryError);
}

TEST(Pool, GrowsByDoubling) {
  SimulatedDevice device({.capacity = kGiB});
  PoolResource pool(device);  // empty
  EXPECT_EQ(device.counters().allocate_calls, 0u);
  for (int i = 0; i < 5; ++i) pool.allocate(kMiB);
  // max(request, pool size): 1, 1, 2 (one MiB left over), 4 MiB.
  auto sizes = [&] {
    std::vector<std::size_t> s;
    for (const PoolBlock& b : pool.upstream_blocks()) s.push_back(b.size);
    return s;
  };
  EXPECT_EQ(sizes(), (std::vector<std::size_t>{kMiB, kMiB, 2 * kMiB, 4 * kMiB}));
  EXPECT_EQ(pool.pool_size(), 8 * kMiB);
  // A request larger than the pool grows by the request.
  pool.allocate(20 * kMiB);
  EXPECT_EQ(pool.pool_size(), 28 * kMiB);
  EXPECT_EQ(device.counters().allocate_calls, 5u);
}

TEST(Pool, AlignsTo256) {
  SimulatedDevice device({.capacity = kGiB});
  PoolResource pool(device, {.initial_pool_size = kMiB});
  void* a = pool.allocate(1);
  void* b = pool.allocate(1);
  void* c = pool.allocate(257);
  void* d = pool.allocate(1);
  EXPECT_EQ(address(a) % 256, 0u);
  EXPECT_EQ(address(b), address(a) + 256);
  EXPECT_EQ(address(c), address(b) + 256);
  EXPECT_EQ(address(d), address(c) + 512);
  EXPECT_EQ(pool.stats().bytes_in_use, 256u + 256u + 512u + 256u);
  EXPECT_EQ(pool.allocate(0), nullptr);
}

TEST(Pool, CoalescesFreedNeighbours) {
  SimulatedDevice device({.capacity = kGiB});
  PoolResource pool(device, {.initial_pool_size = 4 * kMiB});
  void* a = pool.allocate(kMiB);
  void* b = pool.allocate(kMiB);
  void* c = pool.allocate(kMiB);
  void* d = pool.allocate(kMiB);
  pool.deallocate(b, kMiB);
  pool.deallocate(a, kMiB);
  pool.deallocate(c, kMiB);
  std::vector<PoolBlock> free = pool.free_list(kDefaultStream);
  ASSERT_EQ(free.size(), 1u);
  EXPECT_EQ(free[0].address, address(a));
  EXPECT_EQ(free[0].size, 3 * kMiB);
  EXPECT_EQ(pool.allocate(3 * kMiB), a);
  EXPECT_EQ(device.counters().allocate_calls, 1u);
  pool.deallocate(d, kMiB);
}

TEST(Pool, NeverCoalescesAcrossUpstreamAllocations) {
  SimulatedDevice device({.capacity = kGiB});
  PoolResource pool(device, {.initial_pool_size = 2 * kMiB});
  void* a = pool.allocate(2 * kMiB);
  void* b = pool.allocate(2 * kMiB);  // grows by 2 MiB, right after the first
  ASSERT_EQ(address(b), address(a) + 2 * kMiB);
  pool.deallocate(a, 2 * kMiB);
  pool.deallocate(b, 2 * kMiB);
  EXPECT_EQ(pool.free_list(kDefaultStream).size(), 2u);  // b is a head
  pool.allocate(4 * kMiB);
  EXPECT_EQ(device.counters().allocate_calls, 3u);
}

TEST(Pool, PerStreamListsWithStealing) {
  SimulatedDevice device({.capacity = kGiB});
  PoolResource pool(device, {.initial_pool_size = 4 * kMiB});  // on stream 0's list
  const std::uintptr_t base = pool.upstream_blocks()[0].address;

  // Stream 1 has no list: it takes from stream 0's, whose remainder stays.
  void* a = pool.allocate(kMiB, 1);
  EXPECT_EQ(address(a), base);
  ASSERT_EQ(pool.free_list(0).size(), 1u);
  EXPECT_EQ(pool.free_list(0)[0].size, 3 * kMiB);

  // Freed on stream 1, it joins stream 1's list, not its neighbour in 0's.
  pool.deallocate(a, kMiB, 1);
  ASSERT_EQ(pool.free_list(1).size(), 1u);
  EXPECT_EQ(pool.free_list(1)[0].size, kMiB);
  EXPECT_EQ(pool.free_list(0).size(), 1u);

  // No list holds 4 MiB, so stream 1 merges stream 0's list into its own,
  // where the two blocks coalesce: no growth.
  void* big = pool.allocate(4 * kMiB, 1);
  EXPECT_EQ(address(big), base);
  EXPECT_EQ(device.counters().allocate_calls, 1u);
  EXPECT_TRUE(pool.free_list(0).empty());
  pool.deallocate(big, 4 * kMiB, 1);
  EXPECT_EQ(pool.free_list(1).size(), 1u);
}

TEST(Pool, OwnStreamListFirstEvenWhenAnotherFitsBetter) {
  SimulatedDevice device({.capacity = kGiB});
  PoolResource pool(device, {.initial_pool_size = 4 * kMiB});
  void* x = pool.allocate(kMiB);        // stream 0's list: 3 MiB left
  void* y = pool.allocate(512 * kKiB);  // 2.5 MiB left
  pool.deallocate(x, kMiB, 1);          // stream 1's list: exactly 1 MiB
  EXPECT_EQ(pool.allocate(kMiB, 0), static_cast<char*>(y) + 512 * kKiB);
  EXPECT_EQ(pool.allocate(kMiB, 1), x);
}

TEST(Pool, MaximumPoolSize) {
  SimulatedDevice device({.capacity = kGiB});
  PoolResource pool(device, {.initial_pool_size = 0, .maximum_pool_size = 8 * kMiB});
  pool.allocate(kMiB);  // grows by half of what is left: 4 MiB
  EXPECT_EQ(pool.pool_size(), 4 * kMiB);
  pool.allocate(4 * kMiB);  // 3 MiB free do not fit: 4 MiB more (max(4, 4 / 2))
  EXPECT_EQ(pool.pool_size(), 8 * kMiB);
  pool.allocate(kMiB);  // from the 3 MiB
  EXPECT_EQ(device.counters().allocate_calls, 2u);
  const std::string m = oom_message(pool, 4 * kMiB);
  EXPECT_NE(m.find("rmm-pool: Maximum pool size exceeded (failed to allocate 4.00 MiB): Not enough room to grow, "
                   "current/max/try size = 8.00 MiB, 8.00 MiB, 4.00 MiB"),
            std::string::npos)
      << m;
  EXPECT_EQ(device.counters().allocate_calls, 2u);
}

TEST(Pool, HalvesTheGrowthWhenTheDeviceRefuses) {
  SimulatedDevice device({.capacity = 10 * kMiB});
  PoolResource pool(device, {.initial_pool_size = 4 * kMiB});
  pool.allocate(4 * kMiB);
  pool.allocate(kMiB);      // grows by 4 MiB (the pool size)
  pool.allocate(3 * kMiB);  // the rest of it
  pool.allocate(kMiB);      // 8 MiB refused, 4 MiB refused, 2 MiB given
  EXPECT_EQ(device.counters().failed_calls, 2u);
  EXPECT_EQ(pool.pool_size(), 10 * kMiB);
  const std::string m = oom_message(pool, 2 * kMiB);
  EXPECT_NE(m.find("Maximum pool size exceeded (failed to allocate 2.00 MiB): simulated device: cannot allocate"),
            std::string::npos)
      << m;
}

TEST(Pool, ReleaseAndDestructionGiveEverythingBack) {
  SimulatedDevice device({.capacity = kGiB});
  {
    PoolResource pool(device, {.initial_pool_size = 4 * kMiB});
    pool.allocate(10 * kMiB);
    EXPECT_EQ(device.counters().live_allocations, 2u);
    pool.release();
    EXPECT_EQ(device.counters().physical_used, 0u);
    EXPECT_EQ(pool.pool_size(), 0u);
    pool.allocate(kMiB);  // grows again from empty
    EXPECT_EQ(pool.pool_size(), kMiB);
  }
  EXPECT_EQ(device.counters().live_allocations, 0u);
}

TEST(PoolDeathTest, UnknownPointerAborts) {
  SimulatedDevice device({.capacity = kGiB});
  PoolResource pool(device, {.initial_pool_size = kMiB});
  int x = 0;
  EXPECT_DEATH(pool.deallocate(&x, 4), "not a live allocation");
}

// ------------------------------------------------------- random runs ----

// Live ranges as the caller sees them: none may overlap another.
class LiveRanges {
 public:
  void add(void* p, std::size_t bytes) {
    const std::uintptr_t begin = address(p);
    const std::uintptr_t end = begin + BfcAllocator::rounded_bytes(bytes);
    ASSERT_NE(p, nullptr);
    ASSERT_EQ(begin % 256, 0u);
    auto next = ranges_.lower_bound(begin);
    if (next != ranges_.end()) {
      ASSERT_LE(end, next->first) << "overlaps the next live range";
    }
    if (next != ranges_.begin()) {
      ASSERT_LE(std::prev(next)->second, begin) << "overlaps the previous live range";
    }
    ranges_[begin] = end;
  }
  void remove(void* p) { ranges_.erase(address(p)); }

 private:
  std::map<std::uintptr_t, std::uintptr_t> ranges_;
};

// Sizes from 1 B to 64 MiB, uniform in log scale, as real traces spread.
std::size_t random_size(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> log_size(0.0, std::log(64.0 * double(kMiB)));
  return std::max<std::size_t>(1, static_cast<std::size_t>(std::exp(log_size(rng))));
}

struct Live {
  void* ptr;
  std::size_t bytes;
};

// 100,000 random allocations and frees (at most 400 live), on 4 streams.
template <typename Resource>
void random_run(Resource& resource, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  LiveRanges ranges;
  std::vector<Live> live;
  for (int op = 0; op < 100000; ++op) {
    const bool alloc = live.empty() || (live.size() < 400 && rng() % 100 < 52);
    const StreamId stream = rng() % 4;
    if (alloc) {
      const std::size_t bytes = random_size(rng);
      void* p = resource.allocate(bytes, stream);
      ranges.add(p, bytes);
      if (::testing::Test::HasFatalFailure()) return;
      live.push_back({p, bytes});
    } else {
      const std::size_t i = rng() % live.size();
      ranges.remove(live[i].ptr);
      resource.deallocate(live[i].ptr, live[i].bytes, stream);
      live[i] = live.back();
      live.pop_back();
    }
  }
  for (const Live& l : live) resource.deallocate(l.ptr, l.bytes, rng() % 4);
}

TEST(RandomRun, Bfc) {
  SimulatedDevice device({.capacity = std::size_t{1} << 40});
  BfcAllocator bfc(device, {.memory_limit = 64 * kGiB});
  random_run(bfc, 1);
  if (HasFatalFailure()) return;
  EXPECT_EQ(bfc.stats().bytes_in_use, 0u);

  // Everything freed: each region is one free chunk again...
  std::vector<std::size_t> regions = bfc.region_sizes();
  std::vector<BfcChunk> chunks = bfc.chunks();
  ASSERT_EQ(chunks.size(), regions.size());
  for (const BfcChunk& c : chunks) EXPECT_FALSE(c.in_use);
  std::vector<std::size_t> chunk_sizes;
  for (const BfcChunk& c : chunks) chunk_sizes.push_back(c.size);
  std::sort(chunk_sizes.begin(), chunk_sizes.end());
  std::sort(regions.begin(), regions.end());
  EXPECT_EQ(chunk_sizes, regions);
  EXPECT_EQ(device.counters().physical_used, bfc.stats().pool_bytes);

  // ...so every region's full size can be handed out again without growing.
  const std::uint64_t calls = device.counters().allocate_calls;
  for (std::size_t s : regions) bfc.allocate(s);
  EXPECT_EQ(device.counters().allocate_calls, calls);
  EXPECT_EQ(bfc.stats().bytes_in_use, bfc.stats().pool_bytes);
}

TEST(RandomRun, Pool) {
  SimulatedDevice device({.capacity = std::size_t{1} << 40});
  PoolResource pool(device, {.initial_pool_size = 16 * kMiB});
  random_run(pool, 2);
  if (HasFatalFailure()) return;
  EXPECT_EQ(pool.stats().bytes_in_use, 0u);
  EXPECT_EQ(pool.stats().free_bytes, pool.pool_size());
  EXPECT_EQ(device.counters().physical_used, pool.pool_size());

  // Blocks freed on different streams sit in different lists until a
  // request finds nothing anywhere: then RMM merges every list into the
  // requesting stream's before growing. A request too large for the device
  // forces that merge and then fails.
  const std::vector<PoolBlock> upstream = pool.upstream_blocks();
  EXPECT_THROW(pool.allocate(std::size_t{1} << 50, 3), OutOfMemoryError);
  const std::vector<PoolBlock> merged = pool.free_list(3);
  ASSERT_EQ(merged.size(), upstream.size());
  for (std::size_t i = 0; i < merged.size(); ++i) {
    EXPECT_EQ(merged[i].address, upstream[i].address);
    EXPECT_EQ(merged[i].size, upstream[i].size);
  }
  EXPECT_EQ(pool.stats().free_lists, 1u);

  // One block per upstream allocation: each full size is served again
  // without growing.
  const std::uint64_t calls = device.counters().allocate_calls;
  for (const PoolBlock& b : upstream) EXPECT_EQ(address(pool.allocate(b.size, 3)), b.address);
  EXPECT_EQ(device.counters().allocate_calls, calls);
}

}  // namespace
}  // namespace gpumem::alloc
