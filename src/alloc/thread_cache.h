#pragma once
// Per-thread caches of the caching allocator: the path that lets two threads
// allocate and free cached blocks without taking the allocator's lock.
//
// A thread's cache holds a few blocks it freed (a magazine, as in Bonwick's
// slab allocator), the blocks it handed out from them, and its share of the
// statistics. Only its own thread and the allocator's slow paths (under the
// allocator's lock, which always comes first) lock it, so its lock is
// almost never contended.
//
// Statistics stay exact, peaks included. A cache changes a statistic only
// through its share: `delta` is what it added to the current value, and
// `budget` how much more it may add. The allocator keeps, per statistic,
// base + sum over caches of (delta + budget) <= peak, so no value a cache
// reaches can pass the peak; an allocation past its budget takes the slow
// path, which sees every share under the caches' locks and sets the peak
// exactly (see CachingAllocator::Impl::raise).
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "alloc/blocks.h"
#include "alloc/free_index.h"
#include "alloc/pointer_map.h"
#include "gpumem/alloc/stats.h"

namespace gpumem::alloc::detail {

// A lock for a cache: its thread takes it on every fast-path call and
// others only on slow paths, so spinning briefly beats a futex.
class SpinLock {
 public:
  void lock() noexcept {
    while (flag_.exchange(true, std::memory_order_acquire))
      while (flag_.load(std::memory_order_relaxed)) std::this_thread::yield();
  }
  void unlock() noexcept { flag_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> flag_{false};
};

// The statistics the fast path changes, each in three entries (all, small
// pool, large pool): slot = statistic * 3 + entry.
enum class CachedStat : int {
  kAllocation,
  kAllocatedBytes,
  kRequestedBytes,
  kActive,
  kActiveBytes,
  kInactiveSplit,
  kInactiveSplitBytes,
};
inline constexpr int kCachedStats = 7;
inline constexpr int kSlots = kCachedStats * 3;

inline StatArray& stat_array(AllocatorStats& s, CachedStat which) {
  static constexpr StatArray AllocatorStats::*kMembers[kCachedStats] = {
      &AllocatorStats::allocation,          &AllocatorStats::allocated_bytes,
      &AllocatorStats::requested_bytes,     &AllocatorStats::active,
      &AllocatorStats::active_bytes,        &AllocatorStats::inactive_split,
      &AllocatorStats::inactive_split_bytes};
  return s.*kMembers[static_cast<int>(which)];
}

// What one block moving between the caller and a magazine does to the
// statistics: handed out, it becomes an allocation and stops being a
// free piece of a segment; freed, the reverse.
struct StatChange {
  PoolKind kind = PoolKind::kSmall;
  std::array<std::int64_t, kCachedStats> amount{};
};

inline StatChange handed_out(const Block& b, std::size_t requested, bool split) {
  const auto size = static_cast<std::int64_t>(b.size);
  StatChange c{b.segment->pool->kind, {1, size, static_cast<std::int64_t>(requested), 1, size, 0, 0}};
  if (split) {
    c.amount[int(CachedStat::kInactiveSplit)] = -1;
    c.amount[int(CachedStat::kInactiveSplitBytes)] = -size;
  }
  return c;
}

inline StatChange given_back(const Block& b, bool split) {
  StatChange c = handed_out(b, b.requested, split);
  for (std::int64_t& a : c.amount) a = -a;
  return c;
}

// Aligned to a cache line: two threads' caches never share one.
struct alignas(64) ThreadCache {
  static constexpr int kMagazine = 8;
  // A magazine holds at most this much, so a thread's cache cannot keep
  // much memory from the others (it is flushed before any growth anyway).
  static constexpr std::size_t kMagazineBytes = std::size_t{64} << 20;

  SpinLock lock;
  std::array<Block*, kMagazine> magazine{};
  int count = 0;
  std::size_t bytes = 0;
  PointerMap<Block*> live;  // handed out from the magazine, not yet freed
  // Shares of the statistics, by slot.
  std::array<std::int64_t, kSlots> delta{}, budget{}, increased{}, decreased{};
  std::uint64_t calls = 0;        // calls by its thread since budgets were last shared
  bool orphaned = false;          // its thread has exited
  std::atomic<bool> dead{false};  // its allocator is gone

  // The most recently cached block of this size on this stream, or -1.
  int find(std::size_t size, StreamId stream) const {
    for (int i = count - 1; i >= 0; --i)
      if (magazine[i]->size == size && magazine[i]->segment->pool->stream == stream) return i;
    return -1;
  }
  Block* take(int i) {
    Block* b = magazine[i];
    magazine[i] = magazine[--count];
    bytes -= b->size;
    return b;
  }
  bool has_room(const Block& b) const { return count < kMagazine && bytes + b.size <= kMagazineBytes; }
  void put(Block* b) {
    magazine[count++] = b;
    bytes += b->size;
  }
  // Every block of the magazine, appended to `out`; the magazine is empty.
  void drain(std::vector<Block*>& out) {
    while (count > 0) out.push_back(take(count - 1));
  }

  static constexpr int slot(CachedStat s, int entry) { return int(s) * 3 + entry; }

  // Whether the budget covers every increase of `c`.
  bool covers(const StatChange& c) const {
    const int pool = 1 + int(c.kind);
    for (int s = 0; s < kCachedStats; ++s) {
      const std::int64_t a = c.amount[s];
      if (a > 0 && (budget[s * 3] < a || budget[s * 3 + pool] < a)) return false;
    }
    return true;
  }
  void apply(const StatChange& c) {
    const int pool = 1 + int(c.kind);
    for (int s = 0; s < kCachedStats; ++s) {
      const std::int64_t a = c.amount[s];
      if (a == 0) continue;
      for (int slot : {s * 3, s * 3 + pool}) {
        delta[slot] += a;
        budget[slot] -= a;
        (a > 0 ? increased[slot] : decreased[slot]) += a > 0 ? a : -a;
      }
    }
  }
};

// The calling thread's cache for the allocator numbered `allocator`, or
// nullptr; and registering one (false once the thread is exiting: its
// registry is gone). Allocator numbers are never reused, so an entry left by
// a destroyed allocator is never found again; entries whose allocator is
// gone are dropped when the thread registers another.
ThreadCache* this_threads_cache(std::uint64_t allocator) noexcept;
bool register_this_threads_cache(std::uint64_t allocator, std::shared_ptr<ThreadCache> cache);

}  // namespace gpumem::alloc::detail
