// Thread caches (src/alloc/thread_cache.h): with a second thread, cached
// blocks come and go without the allocator's lock, and the statistics stay
// exact, peaks included; blocks held in magazines never make the device grow,
// show as free in snapshots, and come back when their thread exits.
#include <atomic>
#include <barrier>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "gpumem/alloc/caching_allocator.h"
#include "gpumem/alloc/config.h"
#include "gpumem/alloc/simulated_device.h"

namespace gpumem::alloc {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

std::int64_t stat(const CachingAllocator& a, const std::string& key) { return a.stats().flatten().at(key); }

// Runs f on another thread and waits: the allocator then has two threads,
// and its caches are on.
template <typename F>
void on_another_thread(F&& f) {
  std::thread t(std::forward<F>(f));
  t.join();
}

// Holding `n` blocks at once on each of two threads, at a barrier, sets the
// peak to exactly 2n; thousands of pairs on the fast paths between never
// raise it, and a larger overlap raises it to exactly that.
TEST(ThreadCaches, PeaksStayExactWhileThreadsUseTheirMagazines) {
  SimulatedDevice device;
  CachingAllocator a(simulated_upstream(device));
  a.deallocate(a.allocate(4096), 4096);  // the main thread is the first
  std::barrier sync(2);
  auto worker = [&](int seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    for (int held : {3, 5}) {
      std::vector<void*> blocks;
      for (int i = 0; i < held; ++i) blocks.push_back(a.allocate(4096));
      sync.arrive_and_wait();  // both hold `held` blocks now
      sync.arrive_and_wait();  // the main thread has not run meanwhile: the check comes after
      for (void* p : blocks) a.deallocate(p, 4096);
      // Fast paths: one block at a time, well under the peak.
      for (int i = 0; i < 5000; ++i) {
        const std::size_t n = 512 * (1 + rng() % 8);
        void* p = a.allocate(n);
        a.deallocate(p, n);
      }
      sync.arrive_and_wait();
    }
  };
  std::thread t1(worker, 1), t2(worker, 2);
  t1.join();
  t2.join();
  EXPECT_EQ(stat(a, "allocation.all.peak"), 10);  // 5 + 5, at the second barrier
  EXPECT_EQ(stat(a, "allocated_bytes.all.peak"), 10 * 4096);
  EXPECT_EQ(stat(a, "active_bytes.all.peak"), 10 * 4096);
  EXPECT_EQ(stat(a, "requested_bytes.all.peak"), 10 * 4096);
  EXPECT_EQ(stat(a, "allocation.all.current"), 0);
  EXPECT_EQ(stat(a, "allocated_bytes.all.current"), 0);
  EXPECT_EQ(stat(a, "allocation.all.allocated"), 1 + 2 * (3 + 5 + 2 * 5000));
  EXPECT_EQ(stat(a, "allocation.all.freed"), 1 + 2 * (3 + 5 + 2 * 5000));
}

// A thread that holds a budget and sits idle while another sets a new peak:
// the peak counts what is live, not what the idle thread may still take.
TEST(ThreadCaches, APeakSetWhileAnotherThreadHoldsABudgetIsExact) {
  SimulatedDevice device;
  CachingAllocator a(simulated_upstream(device));
  a.deallocate(a.allocate(4096), 4096);
  std::barrier sync(3);
  auto hold_then_loop = [&](int held) {
    std::vector<void*> blocks;
    for (int i = 0; i < held; ++i) blocks.push_back(a.allocate(4096));
    sync.arrive_and_wait();
    for (void* p : blocks) a.deallocate(p, 4096);
    for (int i = 0; i < 1000; ++i) a.deallocate(a.allocate(4096), 4096);  // earns a budget
    sync.arrive_and_wait();
  };
  std::vector<void*> many;
  std::thread idle([&] {
    hold_then_loop(4);
    sync.arrive_and_wait();  // idle, with its budget, while the other allocates
    sync.arrive_and_wait();
  });
  std::thread busy([&] {
    hold_then_loop(4);
    for (int i = 0; i < 12; ++i) many.push_back(a.allocate(4096));
    sync.arrive_and_wait();
    sync.arrive_and_wait();
    for (void* p : many) a.deallocate(p, 4096);
  });
  sync.arrive_and_wait();
  EXPECT_EQ(stat(a, "allocation.all.peak"), 8);
  sync.arrive_and_wait();
  sync.arrive_and_wait();
  EXPECT_EQ(stat(a, "allocation.all.current"), 12);
  EXPECT_EQ(stat(a, "allocation.all.peak"), 12);
  EXPECT_EQ(stat(a, "allocated_bytes.all.peak"), 12 * 4096);
  sync.arrive_and_wait();
  idle.join();
  busy.join();
}

// The peak at the moment both threads hold their blocks is checked while
// they hold them: it must already be exact, not only after they stop.
TEST(ThreadCaches, StatsReadWhileThreadsHoldBlocksAreExact) {
  SimulatedDevice device;
  CachingAllocator a(simulated_upstream(device));
  a.deallocate(a.allocate(1024), 1024);
  std::barrier sync(3);
  auto worker = [&] {
    for (int round = 0; round < 50; ++round) {
      void* p = a.allocate(1024);
      void* q = a.allocate(2048);
      sync.arrive_and_wait();
      sync.arrive_and_wait();
      a.deallocate(q, 2048);
      a.deallocate(p, 1024);
    }
  };
  std::thread t1(worker), t2(worker);
  for (int round = 0; round < 50; ++round) {
    sync.arrive_and_wait();
    const AllocatorStats s = a.stats();
    EXPECT_EQ(s.allocation[kStatAll].current, 4);
    EXPECT_EQ(s.allocated_bytes[kStatAll].current, 2 * (1024 + 2048));
    EXPECT_EQ(s.allocated_bytes[kStatAll].peak, 2 * (1024 + 2048));
    sync.arrive_and_wait();
  }
  t1.join();
  t2.join();
  EXPECT_EQ(stat(a, "allocated_bytes.all.current"), 0);
}

// A block in a running thread's magazine merges back before the device
// grows: another thread's larger request fits the same segment.
TEST(ThreadCaches, MagazinesAreFlushedBeforeTheDeviceGrows) {
  SimulatedDevice device({.capacity = 100 * kMiB});
  CachingAllocator a(simulated_upstream(device));
  void* big = a.allocate(60 * kMiB);
  a.deallocate(big, 60 * kMiB);
  std::barrier sync(2);
  std::thread t([&] {
    void* part = a.allocate(30 * kMiB);  // split from the 60 MiB segment
    a.deallocate(part, 30 * kMiB);       // into this thread's magazine
    sync.arrive_and_wait();
    sync.arrive_and_wait();  // alive while the main thread allocates
  });
  sync.arrive_and_wait();
  const std::int64_t reserved = stat(a, "reserved_bytes.all.current");
  const std::uint64_t device_calls = device.counters().upstream_calls();
  void* whole = a.allocate(60 * kMiB);  // needs the 30 MiB held in the magazine
  EXPECT_EQ(whole, big);
  EXPECT_EQ(stat(a, "reserved_bytes.all.current"), reserved);
  // Not by giving the cache back to the device and retrying.
  EXPECT_EQ(device.counters().upstream_calls(), device_calls);
  EXPECT_EQ(stat(a, "num_alloc_retries"), 0);
  EXPECT_EQ(stat(a, "num_ooms"), 0);
  sync.arrive_and_wait();
  t.join();
  a.deallocate(whole, 60 * kMiB);
  a.empty_cache();
  EXPECT_EQ(device.counters().physical_used, 0u);
}

// Blocks a thread still holds when it exits stay live and can be freed by
// another; what its magazine held goes back to the pools.
TEST(ThreadCaches, AnExitedThreadsBlocksComeBack) {
  SimulatedDevice device;
  CachingAllocator a(simulated_upstream(device));
  a.deallocate(a.allocate(512), 512);
  std::vector<void*> kept;
  on_another_thread([&] {
    for (int i = 0; i < 4; ++i) kept.push_back(a.allocate(8192));
    for (int i = 0; i < 2; ++i) {
      a.deallocate(kept.back(), 8192);  // into the magazine
      kept.pop_back();
    }
    void* p = a.allocate(8192);  // from the magazine, on the fast path
    kept.push_back(p);
  });
  EXPECT_EQ(stat(a, "allocation.all.current"), 3);
  for (void* p : kept) EXPECT_EQ(a.free(p, kDefaultStream), FreeStatus::kOk);
  EXPECT_EQ(stat(a, "allocation.all.current"), 0);
  EXPECT_EQ(stat(a, "allocated_bytes.all.current"), 0);
  a.empty_cache();
  EXPECT_EQ(stat(a, "reserved_bytes.all.current"), 0);
  EXPECT_EQ(device.counters().physical_used, 0u);
}

// A block freed by a thread other than its allocator's goes the slow way,
// and unknown pointers are still refused.
TEST(ThreadCaches, FreesFromAnotherThreadAndUnknownPointers) {
  SimulatedDevice device;
  CachingAllocator a(simulated_upstream(device));
  a.deallocate(a.allocate(512), 512);
  void* p = nullptr;
  on_another_thread([&] {
    void* q = a.allocate(4096);
    a.deallocate(q, 4096);
    p = a.allocate(4096);  // handed out by this thread's cache
  });
  on_another_thread([&] {
    EXPECT_EQ(a.free(p, kDefaultStream), FreeStatus::kOk);
    EXPECT_EQ(a.free(p, kDefaultStream), FreeStatus::kUnknownPointer);
  });
  EXPECT_EQ(stat(a, "allocated_bytes.all.current"), 0);
}

// Snapshots show magazine blocks as free, and their totals agree with the
// statistics.
TEST(ThreadCaches, SnapshotsShowMagazineBlocksAsFree) {
  SimulatedDevice device;
  CachingAllocator a(simulated_upstream(device));
  a.deallocate(a.allocate(512), 512);
  std::barrier sync(2);
  void* live = nullptr;
  std::thread t([&] {
    live = a.allocate(3 * 4096);
    void* p = a.allocate(4096);
    a.deallocate(p, 4096);  // in the magazine
    sync.arrive_and_wait();
    sync.arrive_and_wait();
    a.deallocate(live, 3 * 4096);
  });
  sync.arrive_and_wait();
  const Snapshot snap = a.snapshot();
  std::uint64_t allocated = 0, inactive = 0;
  for (const SegmentSnapshot& seg : snap.segments)
    for (const BlockSnapshot& b : seg.blocks) (b.state == BlockState::kAllocated ? allocated : inactive) += b.size;
  EXPECT_EQ(allocated, 3u * 4096);
  EXPECT_EQ(std::int64_t(allocated + inactive), stat(a, "reserved_bytes.all.current"));
  EXPECT_EQ(stat(a, "allocated_bytes.all.current"), 3 * 4096);
  FreeSpace space;
  a.stats(space);
  EXPECT_EQ(space.free_bytes, inactive);
  sync.arrive_and_wait();
  t.join();
}

// Blocks of at least max_split_size never wait in a magazine: the fast free
// leaves them to the slow path, which counts them out of the oversize
// allocations.
TEST(ThreadCaches, OversizeBlocksNeverEnterAMagazine) {
  SimulatedDevice device;
  CachingAllocator a(simulated_upstream(device), parse_allocator_config("max_split_size_mb:32"));
  a.deallocate(a.allocate(512), 512);
  on_another_thread([&] {
    for (int i = 0; i < 3; ++i) a.deallocate(a.allocate(40 * kMiB), 40 * kMiB);
  });
  EXPECT_EQ(stat(a, "oversize_allocations.current"), 0);
  EXPECT_EQ(stat(a, "oversize_allocations.allocated"), stat(a, "oversize_allocations.freed"));
  EXPECT_EQ(stat(a, "allocated_bytes.all.current"), 0);
}

// A thread-local object made before the thread first used the allocator is
// destroyed after the thread's cache registry, and may still free memory:
// those frees take the plain path and count exactly.
TEST(ThreadCaches, FreesFromThreadLocalDestructorsAfterTheCachesAreGone) {
  SimulatedDevice device;
  CachingAllocator a(simulated_upstream(device));
  a.deallocate(a.allocate(512), 512);
  struct FreesAtExit {
    CachingAllocator* allocator = nullptr;
    std::vector<void*> blocks;
    ~FreesAtExit() {
      for (void* p : blocks) allocator->deallocate(p, 4096);
    }
  };
  on_another_thread([&] {
    thread_local FreesAtExit holder;  // made first, destroyed last
    holder.allocator = &a;
    for (int i = 0; i < 4; ++i) {
      void* p = a.allocate(4096);
      a.deallocate(p, 4096);  // into the magazine
      holder.blocks.push_back(a.allocate(4096));
    }
  });
  EXPECT_EQ(stat(a, "allocation.all.current"), 0);
  EXPECT_EQ(stat(a, "allocated_bytes.all.current"), 0);
  a.empty_cache();
  EXPECT_EQ(stat(a, "reserved_bytes.all.current"), 0);
}

// Randomized: three threads allocate, free their own blocks and each
// other's (handed over through a shared list), on two streams, while a
// fourth reads statistics and snapshots and empties the cache. No block is
// ever shared (each is filled with its owner's mark and checked), and the
// totals agree at the end. Run under ThreadSanitizer too.
TEST(ThreadCaches, RandomCrossThreadFreesWithReadersAndEmptyCache) {
  SimulatedDevice device({.capacity = 512 * kMiB, .backed = true});
  CachingAllocator a(simulated_upstream(device));
  struct Handed {
    unsigned char* p;
    std::size_t n;
    unsigned char mark;
    StreamId stream;
  };
  std::mutex handed_mutex;
  std::vector<Handed> handed;
  std::atomic<int> corrupt{0}, workers_done{0};
  std::atomic<std::int64_t> allocations{0};
  auto check_and_free = [&](const Handed& h) {
    for (std::size_t k = 0; k < h.n; k += 61)
      if (h.p[k] != h.mark) ++corrupt;
    EXPECT_EQ(a.free(h.p, h.stream), FreeStatus::kOk);
  };
  auto worker = [&](unsigned char mark) {
    std::mt19937 rng(mark);
    std::vector<Handed> mine;
    for (int i = 0; i < 6000; ++i) {
      const unsigned r = rng() % 10;
      if (r < 5 || mine.empty()) {
        const std::size_t n = rng() % 4 == 0 ? 512 * (1 + rng() % 4096) : 512 * (1 + rng() % 8);
        const StreamId stream = rng() % 5 == 0 ? 2 : kDefaultStream;
        auto* p = static_cast<unsigned char*>(a.allocate(n, stream));
        ++allocations;
        for (std::size_t k = 0; k < n; k += 61) p[k] = mark;
        mine.push_back({p, n, mark, stream});
      } else if (r < 8) {
        check_and_free(mine.back());
        mine.pop_back();
      } else if (r < 9) {
        std::lock_guard lock(handed_mutex);
        handed.push_back(mine.back());
        mine.pop_back();
      } else {
        Handed h{};
        {
          std::lock_guard lock(handed_mutex);
          if (handed.empty()) continue;
          h = handed.back();
          handed.pop_back();
        }
        check_and_free(h);
      }
    }
    for (const Handed& h : mine) check_and_free(h);
    ++workers_done;
  };
  std::thread reader([&] {
    for (int round = 0; workers_done.load() < 3; ++round) {
      const AllocatorStats s = a.stats();
      EXPECT_GE(s.allocated_bytes[kStatAll].current, 0);
      for (const StatArray* st :
           {&s.allocation, &s.allocated_bytes, &s.requested_bytes, &s.active_bytes, &s.inactive_split_bytes})
        for (const Stat& e : *st) EXPECT_LE(e.current, e.peak);
      EXPECT_LE(s.allocated_bytes[kStatAll].peak, s.reserved_bytes[kStatAll].peak);
      (void)a.snapshot();
      if (round % 3 == 0) a.empty_cache();
      if (round % 3 == 1) a.reset_peak_stats();  // peaks fall to the exact current values
    }
  });
  std::thread t1(worker, 1), t2(worker, 2), t3(worker, 3);
  t1.join();
  t2.join();
  t3.join();
  reader.join();
  for (const Handed& h : handed) check_and_free(h);
  EXPECT_EQ(corrupt.load(), 0);
  const AllocatorStats s = a.stats();
  EXPECT_EQ(s.allocation[kStatAll].current, 0);
  EXPECT_EQ(s.allocated_bytes[kStatAll].current, 0);
  EXPECT_EQ(s.requested_bytes[kStatAll].current, 0);
  EXPECT_EQ(s.active_bytes[kStatAll].current, 0);
  EXPECT_EQ(s.allocation[kStatAll].allocated, allocations.load());
  EXPECT_EQ(s.allocation[kStatAll].freed, allocations.load());
  a.empty_cache();
  EXPECT_EQ(stat(a, "reserved_bytes.all.current"), 0);
  EXPECT_EQ(stat(a, "inactive_split_bytes.all.current"), 0);
  EXPECT_EQ(device.counters().physical_used, 0u);
}

}  // namespace
}  // namespace gpumem::alloc
