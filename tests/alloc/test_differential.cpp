// Differential test: long random sequences of allocations and frees (1 byte
// to GiBs, several streams, frees on other streams) against a reference
// model that knows only what the caller knows. At every step no two live or
// pending blocks overlap, pointers are aligned, and the statistics agree with
// the reference and with the device; at the end nothing stays reserved.
#include <cmath>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "gpumem/alloc/caching_allocator.h"
#include "gpumem/alloc/simulated_device.h"

namespace gpumem::alloc {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kGiB = std::size_t{1} << 30;

struct Range {
  std::uintptr_t end;
  std::size_t requested;
  StreamId stream;
  bool pending = false;     // freed while work on `stream` still used it
  std::uint64_t waits_for = 0;  // that work: launches on `stream`
};

class Reference {
 public:
  explicit Reference(const SimulatedDevice& device) : device_(device) {}

  // Fails the test if [p, p + n) overlaps anything live, or anything freed
  // whose stream work has not finished.
  void add(std::uintptr_t p, std::size_t n, StreamId stream) {
    auto next = ranges_.lower_bound(p);
    while (next != ranges_.end() && next->first < p + n) {
      ASSERT_TRUE(done(next->second)) << "overlaps a " << (next->second.pending ? "pending" : "live")
                                      << " block at " << next->first;
      next = ranges_.erase(next);
    }
    while (next != ranges_.begin() && std::prev(next)->second.end > p) {
      ASSERT_TRUE(done(std::prev(next)->second)) << "overlaps the block before";
      ranges_.erase(std::prev(next));
    }
    ranges_[p] = {p + n, n, stream};
    requested_ += n;
    ++live_;
  }
  // `used_by`: the stream whose queued work still reads it (none: same as
  // the allocation's stream).
  void free(std::uintptr_t p, StreamId used_by) {
    Range& r = ranges_.at(p);
    requested_ -= r.requested;
    --live_;
    if (used_by == r.stream) {
      ranges_.erase(p);
      return;
    }
    r.pending = true;
    r.stream = used_by;
    r.waits_for = device_.launched(used_by);
  }
  std::int64_t requested() const { return static_cast<std::int64_t>(requested_); }
  std::int64_t live() const { return live_; }
  const std::map<std::uintptr_t, Range>& ranges() const { return ranges_; }

 private:
  bool done(const Range& r) const { return r.pending && device_.completed(r.stream) >= r.waits_for; }

  const SimulatedDevice& device_;
  std::map<std::uintptr_t, Range> ranges_;
  std::size_t requested_ = 0;
  std::int64_t live_ = 0;
};

// Mixed sizes: mostly small, some large, a few GiB-sized.
std::size_t random_size(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  double pick = u(rng);
  auto log_uniform = [&](double lo, double hi) {
    return static_cast<std::size_t>(std::exp(std::log(lo) + u(rng) * (std::log(hi) - std::log(lo))));
  };
  if (pick < 0.55) return log_uniform(1, double(kMiB));
  if (pick < 0.93) return log_uniform(double(kMiB), 256.0 * double(kMiB));
  if (pick < 0.99) return log_uniform(256.0 * double(kMiB), 2.0 * double(kGiB));
  return log_uniform(2.0 * double(kGiB), 8.0 * double(kGiB));
}

void check_stats(const CachingAllocator& a, const SimulatedDevice& device, const Reference& ref, bool expandable) {
  AllocatorStats s = a.stats();
  ASSERT_EQ(s.allocation[kStatAll].current, ref.live());
  ASSERT_EQ(s.requested_bytes[kStatAll].current, ref.requested());
  ASSERT_GE(s.allocated_bytes[kStatAll].current, s.requested_bytes[kStatAll].current);
  ASSERT_GE(s.active_bytes[kStatAll].current, s.allocated_bytes[kStatAll].current);
  ASSERT_GE(s.reserved_bytes[kStatAll].current, s.active_bytes[kStatAll].current);
  ASSERT_EQ(s.allocation[kStatAll].current, s.allocation[1].current + s.allocation[2].current);
  ASSERT_EQ(s.reserved_bytes[kStatAll].current, s.reserved_bytes[1].current + s.reserved_bytes[2].current);
  SimulatedDeviceCounters d = device.counters();
  ASSERT_EQ(static_cast<std::size_t>(s.reserved_bytes[kStatAll].current), d.physical_used);
  if (!expandable) ASSERT_EQ(static_cast<std::size_t>(s.segment[kStatAll].current), d.live_allocations);
}

// The snapshot tiles every segment with blocks and agrees with the stats and
// with the reference's live set.
void check_snapshot(const CachingAllocator& a, const Reference& ref) {
  Snapshot snap = a.snapshot();
  AllocatorStats s = a.stats();
  std::int64_t allocated = 0, active = 0, reserved = 0, inactive_split = 0;
  std::map<std::uintptr_t, std::size_t> allocated_blocks;
  for (const SegmentSnapshot& seg : snap.segments) {
    reserved += static_cast<std::int64_t>(seg.total_size);
    std::uintptr_t at = seg.blocks.empty() ? 0 : seg.blocks.front().address;
    for (std::size_t i = 0; i < seg.blocks.size(); ++i) {
      const BlockSnapshot& b = seg.blocks[i];
      if (!seg.expandable) {
        ASSERT_EQ(b.address, at) << "blocks do not tile the segment";
        if (b.state == BlockState::kInactive && seg.blocks.size() > 1) inactive_split += std::int64_t(b.size);
      }
      at = b.address + b.size;
      if (b.state != BlockState::kInactive) active += std::int64_t(b.size);
      if (b.state == BlockState::kAllocated) {
        allocated += std::int64_t(b.size);
        allocated_blocks[b.address] = b.requested_size;
      }
    }
    if (!seg.expandable) ASSERT_EQ(at, seg.address + seg.total_size);
  }
  ASSERT_EQ(allocated, s.allocated_bytes[kStatAll].current);
  ASSERT_EQ(active, s.active_bytes[kStatAll].current);
  ASSERT_EQ(reserved, s.reserved_bytes[kStatAll].current);
  bool expandable = !snap.segments.empty() && snap.segments.front().expandable;
  if (!expandable) ASSERT_EQ(inactive_split, s.inactive_split_bytes[kStatAll].current);
  std::size_t live = 0;
  for (const auto& [p, r] : ref.ranges()) {
    if (r.pending) continue;
    ++live;
    auto it = allocated_blocks.find(p);
    ASSERT_NE(it, allocated_blocks.end()) << "a live pointer is not an allocated block";
    ASSERT_EQ(it->second, r.requested);
  }
  ASSERT_EQ(live, allocated_blocks.size());
}

struct Workload {
  std::size_t operations;
  std::size_t capacity;
  int streams;
  std::size_t target_live;
  std::uint64_t seed;
};

void run(const AllocatorConfig& config, const Workload& w) {
  SimulatedDevice device({.capacity = w.capacity});
  CachingAllocator a(simulated_upstream(device), config);
  Reference ref(device);
  std::mt19937_64 rng(w.seed);
  std::vector<std::pair<std::uintptr_t, StreamId>> live;  // for picking a victim
  std::size_t ooms = 0;
  for (std::size_t op = 0; op < w.operations; ++op) {
    bool allocate = live.empty() || rng() % (2 * w.target_live) >= live.size();
    if (allocate) {
      std::size_t n = random_size(rng);
      auto stream = static_cast<StreamId>(rng() % static_cast<std::uint64_t>(w.streams));
      void* p = nullptr;
      try {
        p = a.allocate(n, stream);
      } catch (const OutOfMemoryError&) {
        ++ooms;
        continue;
      }
      auto address = reinterpret_cast<std::uintptr_t>(p);
      ASSERT_EQ(address % config.round_bytes, 0u);
      ASSERT_NO_FATAL_FAILURE(ref.add(address, n, stream));
      live.emplace_back(address, stream);
    } else {
      std::size_t victim = rng() % live.size();
      auto [address, stream] = live[victim];
      live[victim] = live.back();
      live.pop_back();
      StreamId on = stream;
      bool cross = w.streams > 1 && rng() % 5 == 0;
      if (cross) {
        on = (stream + 1 + rng() % static_cast<std::uint64_t>(w.streams - 1)) % static_cast<StreamId>(w.streams);
        device.launch(on);  // work on `on` still reads the block
      }
      ASSERT_EQ(a.free(reinterpret_cast<void*>(address), on), FreeStatus::kOk);
      ref.free(address, on);
    }
    if (op % 997 == 0) device.complete(static_cast<StreamId>(rng() % static_cast<std::uint64_t>(w.streams)));
    ASSERT_NO_FATAL_FAILURE(check_stats(a, device, ref, config.expandable_segments)) << "after operation " << op;
    if (op % 20011 == 0) ASSERT_NO_FATAL_FAILURE(check_snapshot(a, ref)) << "after operation " << op;
  }
  EXPECT_LT(ooms, w.operations / 100) << "out of memory too often for this workload";
  for (auto [address, stream] : live) ASSERT_EQ(a.free(reinterpret_cast<void*>(address), stream), FreeStatus::kOk);
  device.complete_all();
  a.empty_cache();
  AllocatorStats s = a.stats();
  EXPECT_EQ(s.allocated_bytes[kStatAll].current, 0);
  EXPECT_EQ(s.active_bytes[kStatAll].current, 0);
  EXPECT_EQ(s.reserved_bytes[kStatAll].current, 0);
  EXPECT_EQ(s.segment[kStatAll].current, 0);
  EXPECT_EQ(s.inactive_split_bytes[kStatAll].current, 0);
  SimulatedDeviceCounters d = device.counters();
  EXPECT_EQ(d.physical_used, 0u);
  EXPECT_EQ(d.live_allocations, 0u);
  EXPECT_EQ(d.reserved_address_bytes, 0u);
}

const Workload kBig{300000, 80 * kGiB, 3, 60, 1};

TEST(AllocatorDifferential, GpumemDefaults) { run(AllocatorConfig::gpumem_defaults(), kBig); }
TEST(AllocatorDifferential, PytorchDefaults) { run(AllocatorConfig::pytorch_defaults(), {300000, 80 * kGiB, 3, 60, 2}); }
TEST(AllocatorDifferential, ExpandableSegments) {
  run(parse_allocator_config("expandable_segments:true"), {300000, 80 * kGiB, 3, 60, 3});
}
TEST(AllocatorDifferential, PytorchExpandable) {
  run(parse_allocator_config("preset:pytorch,expandable_segments:true"), {300000, 80 * kGiB, 2, 60, 4});
}
TEST(AllocatorDifferential, MaxSplitSizeAndGarbageCollection) {
  run(parse_allocator_config("max_split_size_mb:256,garbage_collection_threshold:0.5"),
      {300000, 80 * kGiB, 3, 60, 5});
}
// A small device: out-of-memory, cache release and retry run constantly.
TEST(AllocatorDifferential, NearlyFullDevice) {
  run(AllocatorConfig::gpumem_defaults(), {200000, 24 * kGiB, 2, 20, 6});
}
TEST(AllocatorDifferential, NearlyFullDeviceExpandable) {
  run(parse_allocator_config("expandable_segments:true"), {200000, 24 * kGiB, 2, 20, 7});
}

}  // namespace
}  // namespace gpumem::alloc
