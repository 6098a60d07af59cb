// The caching allocator's behaviour, one rule per test, on the simulated GPU.
#include <atomic>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gpumem/alloc/caching_allocator.h"
#include "gpumem/alloc/simulated_device.h"
#include "gpumem/common/error.h"

namespace gpumem::alloc {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kGiB = std::size_t{1} << 30;

std::int64_t stat(const CachingAllocator& a, const std::string& key) { return a.stats().flatten().at(key); }
std::int64_t i64_of(std::size_t n) { return static_cast<std::int64_t>(n); }
std::uintptr_t addr(void* p) { return reinterpret_cast<std::uintptr_t>(p); }

TEST(CachingAllocator, ReusesAFreedBlockWithoutTheDevice) {
  SimulatedDevice device;
  CachingAllocator a(simulated_upstream(device));
  void* p = a.allocate(1000);
  a.deallocate(p, 1000);
  void* q = a.allocate(900);
  EXPECT_EQ(q, p);
  EXPECT_EQ(device.counters().allocate_calls, 1u);
  EXPECT_EQ(stat(a, "allocated_bytes.all.current"), 1024);  // rounded to 512
  EXPECT_EQ(stat(a, "requested_bytes.all.current"), 900);
  EXPECT_EQ(stat(a, "reserved_bytes.small_pool.current"), i64_of(2 * kMiB));
  a.deallocate(q, 900);
}

TEST(CachingAllocator, SplitsAndCoalescesWithinASegment) {
  SimulatedDevice device;
  CachingAllocator a(simulated_upstream(device));
  void* x = a.allocate(100 * 1024);
  void* y = a.allocate(100 * 1024);
  void* z = a.allocate(100 * 1024);
  EXPECT_EQ(addr(y), addr(x) + 100 * 1024);  // carved from one 2 MiB segment
  EXPECT_EQ(addr(z), addr(y) + 100 * 1024);
  EXPECT_EQ(stat(a, "segment.all.current"), 1);
  a.deallocate(y, 100 * 1024);
  EXPECT_EQ(stat(a, "inactive_split.all.current"), 2);  // the hole and the tail
  a.deallocate(x, 100 * 1024);
  a.deallocate(z, 100 * 1024);
  // Everything merged back into one whole, releasable segment.
  EXPECT_EQ(stat(a, "inactive_split.all.current"), 0);
  Snapshot s = a.snapshot();
  ASSERT_EQ(s.segments.size(), 1u);
  ASSERT_EQ(s.segments[0].blocks.size(), 1u);
  EXPECT_EQ(s.segments[0].blocks[0].size, 2 * kMiB);
  a.empty_cache();
  EXPECT_EQ(stat(a, "reserved_bytes.all.current"), 0);
  EXPECT_EQ(device.counters().physical_used, 0u);
}

TEST(CachingAllocator, PytorchSegmentSizesAndSplitRule) {
  SimulatedDevice device;
  CachingAllocator a(simulated_upstream(device), AllocatorConfig::pytorch_defaults());
  void* small = a.allocate(kMiB);       // small pool: 2 MiB segment
  void* big = a.allocate(11 * kMiB);    // 11 MiB rounded to 12 MiB
  void* mid = a.allocate(3 * kMiB);     // under 10 MiB: a 20 MiB segment
  EXPECT_EQ(stat(a, "reserved_bytes.small_pool.current"), i64_of(2 * kMiB));
  EXPECT_EQ(stat(a, "reserved_bytes.large_pool.current"), i64_of(32 * kMiB));
  // 12 MiB segment, 11 MiB request: the 1 MiB remainder is not above 1 MiB,
  // so the whole block is handed out.
  EXPECT_EQ(stat(a, "allocated_bytes.large_pool.current"), i64_of(15 * kMiB));
  a.deallocate(small, kMiB);
  a.deallocate(mid, 3 * kMiB);
  a.deallocate(big, 11 * kMiB);
}

TEST(CachingAllocator, GpumemDefaultsSizeSegmentsToTheRequestAtANewPeak) {
  SimulatedDevice device;
  CachingAllocator a(simulated_upstream(device));
  // 3.5 MiB rounds to a 4 MiB segment (0.5 MiB of rounding): at a new peak
  // gpumem reserves just that, where PyTorch reserves 20 MiB.
  void* mid = a.allocate(3 * kMiB + kMiB / 2);
  EXPECT_EQ(stat(a, "reserved_bytes.large_pool.current"), i64_of(4 * kMiB));
  // 3 MiB would waste a third of itself in a 4 MiB segment: 20 MiB, shared.
  void* other = a.allocate(3 * kMiB);
  EXPECT_EQ(stat(a, "reserved_bytes.large_pool.current"), i64_of(24 * kMiB));
  a.deallocate(mid, 3 * kMiB + kMiB / 2);
  a.deallocate(other, 3 * kMiB);
}

TEST(CachingAllocator, FallsBackToAJustBigEnoughSegmentWhenARoomyOneDoesNotFit) {
  SimulatedDevice device({.capacity = 30 * kMiB});
  CachingAllocator a(simulated_upstream(device));
  void* big = a.allocate(16 * kMiB);
  // 3 MiB would get a 20 MiB segment; 14 MiB are left, so it gets 4 MiB.
  void* mid = a.allocate(3 * kMiB);
  EXPECT_EQ(stat(a, "reserved_bytes.all.current"), i64_of(20 * kMiB));
  EXPECT_EQ(stat(a, "num_ooms"), 0);
  a.deallocate(mid, 3 * kMiB);
  a.deallocate(big, 16 * kMiB);
}

TEST(CachingAllocator, OversizeBlocksAreNotSplitForSmallRequests) {
  SimulatedDevice device;
  CachingAllocator a(simulated_upstream(device), parse_allocator_config("preset:pytorch,max_split_size_mb:64"));
  void* big = a.allocate(100 * kMiB);
  a.deallocate(big, 100 * kMiB);
  void* mid = a.allocate(30 * kMiB);  // must not cut the cached 100 MiB block
  EXPECT_NE(mid, big);
  EXPECT_EQ(stat(a, "segment.all.current"), 2);
  void* big2 = a.allocate(90 * kMiB);  // within 20 MiB of it: takes it whole
  EXPECT_EQ(big2, big);
  EXPECT_EQ(stat(a, "oversize_allocations.current"), 1);
  a.deallocate(mid, 30 * kMiB);
  a.deallocate(big2, 90 * kMiB);
}

TEST(CachingAllocator, StreamsHaveSeparatePools) {
  SimulatedDevice device;
  CachingAllocator a(simulated_upstream(device), AllocatorConfig::pytorch_defaults());
  void* p = a.allocate(4096, 1);
  a.deallocate(p, 4096, 1);
  void* q = a.allocate(4096, 2);
  EXPECT_NE(q, p);  // stream 2 does not take stream 1's cached block
  void* r = a.allocate(4096, 1);
  EXPECT_EQ(r, p);
  a.deallocate(q, 4096, 2);
  a.deallocate(r, 4096, 1);
}

TEST(CachingAllocator, AFreeOnAnotherStreamWaitsForItsWork) {
  SimulatedDevice device;
  CachingAllocator a(simulated_upstream(device));
  void* p = a.allocate(4096, 1);
  device.launch(2);  // a kernel on stream 2 reads p
  a.deallocate(p, 4096, 2);
  EXPECT_EQ(stat(a, "allocated_bytes.all.current"), 0);
  EXPECT_EQ(stat(a, "active_bytes.all.current"), 4096);
  Snapshot s = a.snapshot();
  EXPECT_EQ(s.segments[0].blocks[0].state, BlockState::kPendingFree);
  void* q = a.allocate(4096, 1);
  EXPECT_NE(q, p);  // still in use by stream 2
  device.complete(2);
  void* r = a.allocate(4096, 1);
  EXPECT_EQ(r, p);
  a.deallocate(q, 4096, 1);
  a.deallocate(r, 4096, 1);
  EXPECT_EQ(stat(a, "active_bytes.all.current"), 0);
}

TEST(CachingAllocator, RecordStreamDefersReuse) {
  SimulatedDevice device;
  CachingAllocator a(simulated_upstream(device));
  void* p = a.allocate(4096, 0);
  EXPECT_EQ(a.record_stream(p, 3), FreeStatus::kOk);
  device.launch(3);
  a.deallocate(p, 4096, 0);
  EXPECT_NE(a.allocate(4096, 0), p);
  a.empty_cache();  // waits for stream 3, as PyTorch's synchronize-all
  EXPECT_EQ(stat(a, "num_sync_all_streams"), 1);
  EXPECT_EQ(stat(a, "active.all.current"), 1);
}

TEST(CachingAllocator, UnknownPointersAreRefused) {
  SimulatedDevice device;
  CachingAllocator a(simulated_upstream(device));
  void* p = a.allocate(4096);
  EXPECT_EQ(a.free(p, 0), FreeStatus::kOk);
  EXPECT_EQ(a.free(p, 0), FreeStatus::kUnknownPointer);  // double free
  EXPECT_EQ(a.free(reinterpret_cast<void*>(0x1234), 0), FreeStatus::kUnknownPointer);
  EXPECT_EQ(a.free(nullptr, 0), FreeStatus::kOk);
  EXPECT_EQ(a.allocate(0), nullptr);
}

TEST(CachingAllocator, OutOfMemoryFreesCacheRetriesThenExplains) {
  SimulatedDevice device({.capacity = 100 * kMiB});
  CachingAllocator a(simulated_upstream(device), AllocatorConfig::pytorch_defaults());
  TagId weights = a.intern_tag("weights");
  void* w = a.allocate_tagged(60 * kMiB, 0, weights);
  void* t = a.allocate(30 * kMiB);
  a.deallocate(t, 30 * kMiB);  // cached, not on the device's free list
  void* u = a.allocate(34 * kMiB);  // needs the cached 30 MiB given back first
  EXPECT_EQ(stat(a, "num_alloc_retries"), 1);
  std::string message;
  try {
    a.allocate(20 * kMiB);
  } catch (const OutOfMemoryError& e) {
    message = e.what();
    EXPECT_EQ(e.requested_bytes(), 20 * kMiB);
  }
  EXPECT_NE(message.find("tried to allocate 20.00 MiB"), std::string::npos) << message;
  EXPECT_NE(message.find("capacity 100.00 MiB"), std::string::npos) << message;
  EXPECT_NE(message.find("allocated 94.00 MiB"), std::string::npos) << message;
  EXPECT_NE(message.find("60.00 MiB (weights)"), std::string::npos) << message;
  EXPECT_NE(message.find("fragmentation"), std::string::npos) << message;
  EXPECT_NE(message.find("live by tag: weights 60.00 MiB in 1, untagged 34.00 MiB in 1"), std::string::npos)
      << message;
  EXPECT_EQ(stat(a, "num_ooms"), 1);
  a.deallocate(w, 60 * kMiB);
  a.deallocate(u, 34 * kMiB);
}

TEST(CachingAllocator, OutOfMemoryReportsFragmentation) {
  SimulatedDevice device({.capacity = 8 * kMiB});
  CachingAllocator a(simulated_upstream(device), parse_allocator_config("preset:pytorch"));
  // Fill 4 small segments with 512 KiB blocks, free every other one: half
  // the reserved memory is free, in pieces too small for 1 MiB.
  std::vector<void*> blocks;
  for (int i = 0; i < 16; ++i) blocks.push_back(a.allocate(512 * 1024));
  for (int i = 0; i < 16; i += 2) a.deallocate(blocks[i], 512 * 1024);
  std::string message;
  try {
    a.allocate(kMiB);
  } catch (const OutOfMemoryError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("4.00 MiB reserved but unallocated"), std::string::npos) << message;
  EXPECT_NE(message.find("largest free block 512.00 KiB"), std::string::npos) << message;
  EXPECT_NE(message.find("fragmentation 87.5%"), std::string::npos) << message;
  EXPECT_NE(message.find("expandable_segments:true avoids this"), std::string::npos) << message;
}

TEST(CachingAllocator, ReservedLimitIsABudget) {
  SimulatedDevice device;
  CachingAllocator a(simulated_upstream(device), parse_allocator_config("reserved_limit_mb:64"));
  void* p = a.allocate(60 * kMiB);
  EXPECT_THROW(a.allocate(8 * kMiB), OutOfMemoryError);
  a.deallocate(p, 60 * kMiB);
  void* q = a.allocate(8 * kMiB);
  a.deallocate(q, 8 * kMiB);
}

// A valid config other than the presets, set in C++: 1 KiB rounding, with
// segments and rounding that are multiples of it. The review's overlapping
// sequence, scaled to this rounding, must hand out disjoint blocks.
TEST(CachingAllocator, AValidNonDefaultConfigWorksEndToEnd) {
  SimulatedDevice device;
  AllocatorConfig config;
  config.round_bytes = 1024;
  config.small_size = 512 * 1024;
  config.small_segment = 4 * kMiB;
  config.large_segment = 16 * kMiB;
  config.min_large_alloc = 8 * kMiB;
  config.large_round = 4 * kMiB;
  config.max_split_size = 64 * kMiB;
  config.release_before_new_peak = false;
  CachingAllocator a(simulated_upstream(device), config);

  void* first = a.allocate(100);      // rounded to 1 KiB
  void* neighbour = a.allocate(1500);  // rounded to 2 KiB, right after it
  EXPECT_EQ(addr(first) % 1024, 0u);
  EXPECT_EQ(addr(neighbour), addr(first) + 1024);
  EXPECT_EQ(stat(a, "allocated_bytes.small_pool.current"), 3 * 1024);
  EXPECT_EQ(stat(a, "reserved_bytes.small_pool.current"), i64_of(4 * kMiB));
  a.deallocate(first, 100);
  void* larger = a.allocate(2048);  // the freed 1 KiB block is too small for it
  EXPECT_TRUE(addr(larger) + 2048 <= addr(neighbour) || addr(larger) >= addr(neighbour) + 2048);
  void* again = a.allocate(1024);  // but fits this exactly
  EXPECT_EQ(again, first);

  void* big = a.allocate(5 * kMiB);  // under min_large_alloc: a 16 MiB segment it shares
  void* next = a.allocate(5 * kMiB);
  EXPECT_EQ(addr(next), addr(big) + 5 * kMiB);
  EXPECT_EQ(stat(a, "reserved_bytes.large_pool.current"), i64_of(16 * kMiB));
  void* huge = a.allocate(9 * kMiB + 1);  // its own segment, rounded to 4 MiB
  EXPECT_EQ(stat(a, "reserved_bytes.large_pool.current"), i64_of(28 * kMiB));

  for (auto [p, n] : {std::pair{neighbour, 1500}, {larger, 2048}, {again, 1024}})
    a.deallocate(p, static_cast<std::size_t>(n));
  for (void* p : {big, next}) a.deallocate(p, 5 * kMiB);
  a.deallocate(huge, 9 * kMiB + 1);
  // Everything merged back: each segment is one free block again.
  const Snapshot s = a.snapshot();
  ASSERT_EQ(s.segments.size(), 3u);
  for (const auto& segment : s.segments) EXPECT_EQ(segment.blocks.size(), 1u);
  a.empty_cache();
  EXPECT_EQ(stat(a, "reserved_bytes.all.current"), 0);
  EXPECT_EQ(device.counters().physical_used, 0u);
}

TEST(CachingAllocator, HighWaterGuardGivesBackUnusableCacheBeforeANewPeak) {
  // A 30 MiB block is cached; then 40 MiB is needed. PyTorch's rules keep
  // the 30 MiB and reserve 70 MiB; the guard gives it back first: 40 MiB.
  for (bool guard : {false, true}) {
    SimulatedDevice device;
    AllocatorConfig config;
    config.release_before_new_peak = guard;
    CachingAllocator a(simulated_upstream(device), config);
    void* p = a.allocate(30 * kMiB);
    a.deallocate(p, 30 * kMiB);
    void* q = a.allocate(40 * kMiB);
    EXPECT_EQ(stat(a, "reserved_bytes.all.peak"), i64_of((guard ? 40 : 70) * kMiB));
    a.deallocate(q, 40 * kMiB);
  }
}

TEST(CachingAllocator, GarbageCollectionKeepsReservedUnderTheThreshold) {
  SimulatedDevice device({.capacity = 100 * kMiB});
  CachingAllocator a(simulated_upstream(device), parse_allocator_config("garbage_collection_threshold:0.5,"
                                                                        "release_before_new_peak:false"));
  for (std::size_t mib : {20, 22, 24}) a.deallocate(a.allocate(mib * kMiB), mib * kMiB);
  EXPECT_LE(stat(a, "reserved_bytes.all.current"), i64_of(50 * kMiB));
  EXPECT_EQ(stat(a, "num_alloc_retries"), 0);
}

TEST(CachingAllocator, ExpandableSegmentsGrowOneRangeAndUnmapOnEmptyCache) {
  SimulatedDevice device;
  CachingAllocator a(simulated_upstream(device), parse_allocator_config("expandable_segments:true"));
  void* x = a.allocate(3 * kMiB);
  void* y = a.allocate(5 * kMiB);
  EXPECT_EQ(addr(y), addr(x) + 3 * kMiB);  // one range, contiguous
  EXPECT_EQ(stat(a, "segment.large_pool.current"), 1);
  EXPECT_EQ(stat(a, "reserved_bytes.all.current"), i64_of(8 * kMiB));  // 4 granules of 2 MiB
  a.deallocate(x, 3 * kMiB);
  void* z = a.allocate(2 * kMiB);  // reuses the hole, nothing new mapped
  EXPECT_EQ(z, x);
  EXPECT_EQ(device.counters().map_calls, 2u);
  a.deallocate(y, 5 * kMiB);
  a.deallocate(z, 2 * kMiB);
  a.empty_cache();
  EXPECT_EQ(stat(a, "reserved_bytes.all.current"), 0);
  EXPECT_EQ(stat(a, "segment.all.current"), 0);
  SimulatedDeviceCounters n = device.counters();
  EXPECT_EQ(n.physical_used, 0u);
  EXPECT_EQ(n.reserved_address_bytes, 0u);
}

// Found by fuzz_allocator: while a failed map released the cache, the free
// pending on stream 2 completed next to the taken block; the block went back
// unmerged and the granule they share could never be unmapped.
TEST(CachingAllocator, ExpandableOutOfMemoryNextToAPendingFreeLeavesNothingMapped) {
  SimulatedDevice device({.capacity = 64 * kMiB});
  CachingAllocator a(simulated_upstream(device), parse_allocator_config("expandable_segments:true"));
  void* p = a.allocate(3 * kMiB, 3);
  device.launch(2);
  a.deallocate(p, 3 * kMiB, 2);
  EXPECT_THROW(a.allocate(80 * kMiB, 3), OutOfMemoryError);
  device.complete_all();
  a.empty_cache();
  EXPECT_EQ(stat(a, "reserved_bytes.all.current"), 0);
  EXPECT_EQ(device.counters().physical_used, 0u);
}

TEST(CachingAllocator, ExpandableSegmentsNeedVirtualMemory) {
  SimulatedDevice device;
  Upstream plain{&device, nullptr, &device, 0};
  EXPECT_THROW(CachingAllocator(plain, parse_allocator_config("expandable_segments:true")), InputError);
}

TEST(CachingAllocator, ExpandableSegmentsDoNotFragmentIntoUnusableSegments) {
  // The allocation pattern that fails under PyTorch's defaults: many blocks
  // freed in a checkerboard, then one large request. A growing range unmaps
  // the freed holes and maps the request at the end.
  SimulatedDevice device({.capacity = 64 * kMiB});
  CachingAllocator a(simulated_upstream(device), parse_allocator_config("expandable_segments:true"));
  std::vector<void*> blocks;
  for (int i = 0; i < 14; ++i) blocks.push_back(a.allocate(4 * kMiB));
  for (int i = 0; i < 14; i += 2) a.deallocate(blocks[i], 4 * kMiB);
  void* big = a.allocate(28 * kMiB);  // 28 MiB live + 28 MiB needs the holes back
  EXPECT_NE(big, nullptr);
  EXPECT_EQ(stat(a, "num_ooms"), 0);
  for (int i = 1; i < 14; i += 2) a.deallocate(blocks[i], 4 * kMiB);
  a.deallocate(big, 28 * kMiB);
}

// A free block whose front was unmapped by the high-water guard and whose
// end lies over mapped granules, beside a live block: best fit takes its
// start and maps new granules; the guard's placement takes its end and maps
// nothing (the case that made resnet50-batches reserve 368 MiB for 294).
TEST(CachingAllocator, ExpandablePlacesABlockWhereItNeedsTheFewestNewGranules) {
  SimulatedDevice device({.capacity = 1024 * kMiB});
  CachingAllocator a(simulated_upstream(device), parse_allocator_config("expandable_segments:true"));
  void* a1 = a.allocate(20 * kMiB);
  void* a2 = a.allocate(20 * kMiB);
  void* b = a.allocate(10 * kMiB);
  a.deallocate(a1, 20 * kMiB);
  void* c = a.allocate(60 * kMiB);  // a new peak: the guard unmaps a1's granules first
  EXPECT_EQ(stat(a, "reserved_bytes.all.current"), i64_of(90 * kMiB));
  a.deallocate(a2, 20 * kMiB);  // [0, 40) free: its front unmapped, its end mapped
  const std::uint64_t maps = device.counters().map_calls;
  void* d = a.allocate(20 * kMiB);
  EXPECT_EQ(d, a2);
  EXPECT_EQ(device.counters().map_calls, maps);
  EXPECT_EQ(stat(a, "reserved_bytes.all.current"), i64_of(90 * kMiB));
  // PyTorch maps what best fit chose: the start of the free block.
  SimulatedDevice device2({.capacity = 1024 * kMiB});
  CachingAllocator p(simulated_upstream(device2), parse_allocator_config("preset:pytorch,expandable_segments:true"));
  void* p1 = p.allocate(20 * kMiB);
  void* p2 = p.allocate(20 * kMiB);
  p.allocate(10 * kMiB);
  p.deallocate(p1, 20 * kMiB);
  p.empty_cache();  // what the guard did above
  p.allocate(60 * kMiB);
  p.deallocate(p2, 20 * kMiB);
  EXPECT_EQ(p.allocate(20 * kMiB), p1);
  for (void* x : {b, c, d}) a.deallocate(x, 10 * kMiB);
}

// Another free block lies over mapped granules where best fit's does not.
TEST(CachingAllocator, ExpandablePrefersAMappedFreeBlockToATighterUnmappedOne) {
  SimulatedDevice device({.capacity = 1024 * kMiB});
  CachingAllocator a(simulated_upstream(device), parse_allocator_config("expandable_segments:true"));
  void* x = a.allocate(40 * kMiB);
  void* b = a.allocate(10 * kMiB);
  a.deallocate(x, 40 * kMiB);
  void* y = a.allocate(60 * kMiB);  // a new peak: x's granules are unmapped
  a.deallocate(y, 60 * kMiB);       // y's stay mapped
  const std::uint64_t maps = device.counters().map_calls;
  void* z = a.allocate(40 * kMiB);  // best fit: x's hole, exactly 40 MiB, unmapped
  EXPECT_EQ(z, y);
  EXPECT_EQ(device.counters().map_calls, maps);
  a.deallocate(z, 40 * kMiB);
  a.deallocate(b, 10 * kMiB);
}

TEST(CachingAllocator, SnapshotHistoryAndSummary) {
  SimulatedDevice device;
  AllocatorConfig config;
  config.history_capacity = 5;
  CachingAllocator a(simulated_upstream(device), config);
  TagId act = a.intern_tag("activations");
  void* p = a.allocate_tagged(5000, 0, act);
  void* q = a.allocate(3 * kMiB);
  a.deallocate(q, 3 * kMiB);
  nlohmann::json snap = to_json(a.snapshot());
  ASSERT_EQ(snap["segments"].size(), 2u);
  EXPECT_EQ(snap["segments"][0]["segment_type"], "small");
  EXPECT_EQ(snap["segments"][0]["blocks"][0]["tag"], "activations");
  EXPECT_EQ(snap["segments"][0]["blocks"][0]["requested_size"], 5000);
  EXPECT_EQ(snap["segments"][0]["blocks"][0]["state"], "active_allocated");

  // 6 events happened (segment_alloc, alloc, segment_alloc, alloc,
  // free_requested, free_completed); the ring keeps the last 5.
  std::vector<HistoryEvent> events = a.history();
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events.front().action, HistoryAction::kAlloc);
  EXPECT_EQ(events.back().action, HistoryAction::kFreeCompleted);
  std::ostringstream out;
  a.write_history(out);
  std::istringstream lines(out.str());
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(nlohmann::json::parse(line)["dropped"], 1);
  std::getline(lines, line);
  nlohmann::json first = nlohmann::json::parse(line);
  EXPECT_EQ(first["action"], "alloc");
  EXPECT_EQ(first["tag"], "activations");
  EXPECT_EQ(first["requested"], 5000);

  std::string summary = a.memory_summary();
  EXPECT_NE(summary.find("Allocated memory"), std::string::npos);
  EXPECT_NE(summary.find("5.00 KiB"), std::string::npos) << summary;  // 5000 rounded to 5120
  a.reset_peak_stats();
  EXPECT_EQ(stat(a, "reserved_bytes.all.peak"), stat(a, "reserved_bytes.all.current"));
  a.deallocate(p, 5000);
}

TEST(CachingAllocator, ConcurrentThreadsNeverShareABlock) {
  SimulatedDevice device({.backed = true});
  CachingAllocator a(simulated_upstream(device));
  constexpr int kThreads = 4, kRounds = 20000;
  std::vector<std::thread> threads;
  std::atomic<int> corrupt{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::pair<unsigned char*, std::size_t>> live;
      for (int i = 0; i < kRounds; ++i) {
        if (live.size() > 16 || (i % 3 == 2 && !live.empty())) {
          auto [p, n] = live.back();
          live.pop_back();
          for (std::size_t k = 0; k < n; k += 97)
            if (p[k] != static_cast<unsigned char>(t)) ++corrupt;
          a.deallocate(p, n);
        } else {
          std::size_t n = 64 + static_cast<std::size_t>((i * 7919 + t * 104729) % 300000);
          auto* p = static_cast<unsigned char*>(a.allocate(n));
          for (std::size_t k = 0; k < n; k += 97) p[k] = static_cast<unsigned char>(t);
          live.emplace_back(p, n);
        }
      }
      for (auto [p, n] : live) a.deallocate(p, n);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(corrupt.load(), 0);
  EXPECT_EQ(stat(a, "allocated_bytes.all.current"), 0);
  a.empty_cache();
  EXPECT_EQ(device.counters().physical_used, 0u);
}

}  // namespace
}  // namespace gpumem::alloc
