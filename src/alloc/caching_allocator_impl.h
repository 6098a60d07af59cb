#pragma once
// The caching allocator's state and its hot path (private to src/alloc/):
// the class behind CachingAllocator, shared by the files that implement it.
//   caching_allocator.cpp             the public class over it
//   caching_allocator_threads.cpp     thread caches' slow paths: sharing
//                                     budgets, folding shares, magazines
//   caching_allocator_segments.cpp    growing and shrinking: segment sizes,
//                                     new segments, giving memory back
//   caching_allocator_expandable.cpp  expandable segments: virtual ranges,
//                                     granules, where a block goes
//   caching_allocator_report.cpp      free space, out-of-memory messages,
//                                     snapshots
// The hot path (a cached block of the right size exists) is: one lock, a
// best-fit lookup in the stream's pool, a split, a pointer-map insert; with
// two threads or more, first the thread's own cache without the lock.
// Segment growth, releasing cache, events and out-of-memory explanations
// are kept out of it.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "alloc/blocks.h"
#include "alloc/free_index.h"
#include "alloc/pointer_map.h"
#include "alloc/thread_cache.h"
#include "gpumem/alloc/caching_allocator.h"
#include "gpumem/alloc/memory_resource.h"
#include "gpumem/common/error.h"

namespace gpumem::alloc {

using detail::Block;
using detail::BlockArena;
using detail::CachedStat;
using detail::Pool;
using detail::Segment;
using detail::StatChange;
using detail::ThreadCache;

inline std::int64_t i64(std::size_t n) { return static_cast<std::int64_t>(n); }

// Thread caches find their allocator by number: an address can be reused by
// the next allocator, a number cannot.
inline std::uint64_t next_allocator_number() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

// Tells threads apart in a few instructions (std::this_thread::get_id() is
// a call): a new thread may reuse an exited one's key, which only delays
// thread caches.
inline const void* this_thread_key() {
  thread_local char key;
  return &key;
}

// Every thread cache of an allocator locked, in registration order, for as
// long as the slow path walks blocks they may hold or reads their shares.
class CacheLocks {
 public:
  explicit CacheLocks(const std::vector<std::shared_ptr<ThreadCache>>& caches) : caches_(caches) {
    for (const auto& c : caches_) c->lock.lock();
  }
  ~CacheLocks() {
    for (const auto& c : caches_) c->lock.unlock();
  }
  CacheLocks(const CacheLocks&) = delete;
  CacheLocks& operator=(const CacheLocks&) = delete;

 private:
  const std::vector<std::shared_ptr<ThreadCache>>& caches_;
};

class CachingAllocator::Impl {
 public:
  Impl(Upstream upstream, const AllocatorConfig& config, const TagTable& tags)
      : up_(upstream), config_(config), tags_(tags), history_(config.history_capacity) {
    if (!up_.memory && !config_.expandable_segments) throw InputError("caching allocator: no upstream memory resource");
    if (config_.expandable_segments && !up_.vmm)
      throw InputError(
          "GPUMEM_ALLOC_CONF: expandable_segments needs an upstream with virtual memory "
          "(CUDA VMM or the simulated device)");
    if (up_.capacity == 0 && up_.vmm) up_.capacity = up_.vmm->physical_capacity();
    limit_ = config_.reserved_limit ? config_.reserved_limit : SIZE_MAX;
    stats_.max_split_size = config_.max_split_size == SIZE_MAX ? -1 : i64(config_.max_split_size);
  }

  ~Impl() {
    std::lock_guard lock(mutex_);
    // Threads may keep their caches past the allocator: they must never
    // touch its blocks again.
    for (const auto& c : caches_) {
      std::lock_guard cache_lock(c->lock);
      c->count = 0;
      c->live = {};
      c->dead.store(true, std::memory_order_release);
    }
    process_events(/*wait=*/true);
    // Callers must not use pointers past the allocator's life: everything,
    // live or cached, goes back to the upstream.
    for (auto& [base, segment] : segments_) {
      if (segment->expandable) {
        unmap_range(*segment, segment->base, segment->base + segment->size);
        up_.vmm->release(segment->base, segment->size);
      } else {
        up_.memory->deallocate(reinterpret_cast<void*>(segment->base), segment->size, segment->pool->stream);
      }
    }
  }

  std::size_t capacity() const { return up_.capacity; }

  // ---- the hot path -------------------------------------------------------

  void* allocate(std::size_t bytes, StreamId stream, TagId tag) {
    if (bytes == 0) return nullptr;
    if (bytes > kMaxBytes) {
      std::lock_guard lock(mutex_);
      out_of_memory(bytes, stream, "the request is larger than any device");
    }
    const std::size_t size = bytes < config_.round_bytes ? config_.round_bytes : round_up(bytes, config_.round_bytes);
    // With more than one thread: the thread's own magazine, without the lock.
    ThreadCache* cache = caches_on_.load(std::memory_order_acquire) ? detail::this_threads_cache(id_) : nullptr;
    bool short_of_budget = false;
    if (cache) {
      std::lock_guard cache_lock(cache->lock);
      ++cache->calls;
      if (const int i = cache->find(size, stream); i >= 0) {
        Block* b = cache->magazine[i];
        const StatChange change = detail::handed_out(*b, bytes, b->split_when_cached);
        if (cache->covers(change)) {
          cache->live.insert(b->address, b);  // first: it may allocate, and throw
          cache->take(i);
          cache->apply(change);
          b->in_thread_cache = false;
          b->requested = bytes;
          b->tag = tag;
          return reinterpret_cast<void*>(b->address);
        }
        short_of_budget = true;
      }
    }

    std::lock_guard lock(mutex_);
    if (!pending_.empty()) process_events(/*wait=*/false);
    const PoolKind kind = size <= config_.small_size ? PoolKind::kSmall : PoolKind::kLarge;
    Pool& pool = pool_for(stream, kind);
    if (!cache) cache = cache_for_this_thread();

    Block* block = cache ? take_from_magazine(*cache, size, stream) : nullptr;
    if (!block) block = obtain(pool, size, bytes);
    split(block, size);

    block->requested = bytes;
    block->tag = tag;
    if (cache) {
      // In the thread's map, its free takes the fast path and returns the
      // budget the next allocation needs.
      block->split_when_cached = is_split(block);  // what the fast free counts
      std::lock_guard cache_lock(cache->lock);
      cache->live.insert(block->address, block);
    } else {
      live_.insert(block->address, block);
    }
    raise(CachedStat::kAllocation, kind, 1);
    raise(CachedStat::kAllocatedBytes, kind, i64(block->size));
    raise(CachedStat::kActive, kind, 1);
    raise(CachedStat::kActiveBytes, kind, i64(block->size));
    raise(CachedStat::kRequestedBytes, kind, i64(bytes));
    if (block->size >= config_.max_split_size) stats_.oversize_allocations.increase(1);
    history_.record(HistoryAction::kAlloc, block->address, block->size, bytes, stream, tag);
    if (short_of_budget) rebalance(cache);
    return reinterpret_cast<void*>(block->address);
  }

  FreeStatus free(void* ptr, StreamId stream) {
    if (ptr == nullptr) return FreeStatus::kOk;
    const auto address = reinterpret_cast<std::uintptr_t>(ptr);
    // A block the thread took from its magazine goes back there.
    ThreadCache* cache = caches_on_.load(std::memory_order_acquire) ? detail::this_threads_cache(id_) : nullptr;
    bool short_of_budget = false;
    if (cache) {
      std::lock_guard cache_lock(cache->lock);
      ++cache->calls;
      if (Block** found = cache->live.find(address)) {
        Block* b = *found;
        if (b->segment->pool->stream == stream && b->stream_uses.empty() && b->size < config_.max_split_size &&
            cache->has_room(*b)) {
          const StatChange change = detail::given_back(*b, b->split_when_cached);
          if (cache->covers(change)) {
            cache->live.erase(address);
            cache->apply(change);
            b->requested = 0;
            b->tag = kNoTag;
            b->in_thread_cache = true;
            cache->put(b);
            return FreeStatus::kOk;
          }
          short_of_budget = true;
        }
      }
    }

    std::lock_guard lock(mutex_);
    Block* block = take_live(address);
    if (!block) return FreeStatus::kUnknownPointer;
    const PoolKind kind = block->segment->pool->kind;
    const StreamId own = block->segment->pool->stream;
    block->allocated = false;
    decrease(stats_.allocation, kind, 1);
    decrease(stats_.allocated_bytes, kind, i64(block->size));
    decrease(stats_.requested_bytes, kind, i64(block->requested));
    if (block->size >= config_.max_split_size) stats_.oversize_allocations.decrease(1);

    if (stream != own &&
        std::find(block->stream_uses.begin(), block->stream_uses.end(), stream) == block->stream_uses.end())
      block->stream_uses.push_back(stream);
    history_.record(HistoryAction::kFreeRequested, block->address, block->size, block->size, own, block->tag);
    if (block->stream_uses.empty() || !up_.events) {
      free_block(block, stream == own ? (cache ? cache : cache_for_this_thread()) : nullptr);
      if (short_of_budget) rebalance(cache);
      return FreeStatus::kOk;
    }
    // Other streams may still read it: reuse waits for their queued work.
    for (StreamId use : block->stream_uses) {
      pending_.push_back({up_.events->record(use), block});
      ++block->pending_events;
    }
    block->stream_uses.clear();
    return FreeStatus::kOk;
  }

  FreeStatus record_stream(void* ptr, StreamId stream) {
    std::lock_guard lock(mutex_);
    // A block a thread cache handed out is changed under that cache's lock:
    // its thread reads stream_uses on its fast path.
    CacheLocks caches(caches_);
    Block* block = find_live(reinterpret_cast<std::uintptr_t>(ptr));
    if (!block) return FreeStatus::kUnknownPointer;
    if (stream != block->segment->pool->stream &&
        std::find(block->stream_uses.begin(), block->stream_uses.end(), stream) == block->stream_uses.end())
      block->stream_uses.push_back(stream);
    return FreeStatus::kOk;
  }

  void empty_cache() {
    std::lock_guard lock(mutex_);
    release_all_cached();
  }

  AllocatorStats stats() const {
    std::lock_guard lock(mutex_);
    CacheLocks caches(caches_);
    return with_cache_shares();
  }

  AllocatorStats stats(FreeSpace& space) const {
    std::lock_guard lock(mutex_);
    CacheLocks caches(caches_);
    space = free_space_locked();
    return with_cache_shares();
  }

  void reset_peak_stats() {
    std::lock_guard lock(mutex_);
    // Under every cache's lock at once: the peaks fall to the exact current
    // values, and no headroom is left to hand out.
    CacheLocks caches(caches_);
    fold_caches_locked();
    reclaim_budgets_locked();
    for (StatArray* a : stat_arrays())
      for (Stat& s : *a) s.reset_peak();
    stats_.oversize_allocations.reset_peak();
    stats_.oversize_segments.reset_peak();
  }

  void reset_accumulated_stats() {
    std::lock_guard lock(mutex_);
    CacheLocks caches(caches_);
    fold_caches_locked();
    for (StatArray* a : stat_arrays())
      for (Stat& s : *a) s.reset_accumulated();
    stats_.oversize_allocations.reset_accumulated();
    stats_.oversize_segments.reset_accumulated();
    stats_.num_alloc_retries = stats_.num_ooms = stats_.num_sync_all_streams = 0;
    stats_.num_device_alloc = stats_.num_device_free = 0;
  }

  Snapshot snapshot() const;

  std::vector<HistoryEvent> history() const {
    std::lock_guard lock(mutex_);
    return history_.events();
  }
  std::uint64_t history_dropped() const {
    std::lock_guard lock(mutex_);
    return history_.dropped();
  }

 private:
  struct PendingFree {
    EventBackend::Event event;
    Block* block;
  };
  struct StreamPools {
    StreamPools(StreamId s, std::pmr::memory_resource* nodes)
        : stream(s), small(s, PoolKind::kSmall, nodes), large(s, PoolKind::kLarge, nodes) {}
    StreamId stream;
    Pool small;
    Pool large;
  };

  std::vector<StatArray*> stat_arrays() {
    return {&stats_.allocation,      &stats_.segment,        &stats_.active,       &stats_.inactive_split,
            &stats_.allocated_bytes, &stats_.reserved_bytes, &stats_.active_bytes, &stats_.inactive_split_bytes,
            &stats_.requested_bytes};
  }

  Pool& pool_for(StreamId stream, PoolKind kind) {
    if (!last_pools_ || last_pools_->stream != stream) {
      last_pools_ = nullptr;
      for (auto& p : pools_)
        if (p->stream == stream) last_pools_ = p.get();
      if (!last_pools_) last_pools_ = pools_.emplace_back(std::make_unique<StreamPools>(stream, &nodes_)).get();
    }
    return kind == PoolKind::kSmall ? last_pools_->small : last_pools_->large;
  }

  // ---- thread caches (thread_cache.h) -------------------------------------

  // The calling thread's cache, made on its first slow path. Caches start
  // once a second thread calls: one thread alone keeps the plain path, so
  // single-threaded replays place every block as they always did. History
  // keeps every event in order, so it keeps them off.
  ThreadCache* cache_for_this_thread() {
    if (!caches_on_.load(std::memory_order_relaxed) && this_thread_key() == first_thread_) [[likely]]
      return nullptr;
    return cache_for_this_thread_slowly();
  }

  [[gnu::noinline]] ThreadCache* cache_for_this_thread_slowly();

  // A block of exactly `size` from the thread's magazine, back as a pool
  // block that was just taken (allocated, not in the free index).
  Block* take_from_magazine(ThreadCache& cache, std::size_t size, StreamId stream);

  // A block leaving a magazine stops counting as a free piece of a segment
  // (free_block() counted it going in, as cache() would have).
  void uncount_magazine_block(const Block* b) {
    if (!b->split_when_cached) return;
    decrease(stats_.inactive_split, b->segment->pool->kind, 1);
    decrease(stats_.inactive_split_bytes, b->segment->pool->kind, i64(b->size));
  }

  // A live block by address, from the allocator's map or a thread cache's
  // (the caller holds every cache's lock), or nullptr.
  Block* find_live(std::uintptr_t address);

  // The same, taken out of its map.
  Block* take_live(std::uintptr_t address);

  // Stat::increase for a statistic thread caches share: the peak accounts
  // for what the caches added and may still add (cache_reserve_). Past it,
  // the caches give their budgets back, and the peak is set from the exact
  // total: base plus every cache's delta. On the hot path: two additions
  // and a compare per entry, as Stat::increase.
  [[gnu::always_inline]] void raise(CachedStat which, PoolKind kind, std::int64_t amount) {
    StatArray& a = detail::stat_array(stats_, which);
    const int base = ThreadCache::slot(which, 0);
    bump(a[kStatAll], base, amount);
    bump(a[1 + static_cast<std::size_t>(kind)], base + 1 + static_cast<int>(kind), amount);
  }

  [[gnu::always_inline]] void bump(Stat& st, int slot, std::int64_t amount) {
    st.current += amount;
    st.allocated += amount;
    if (st.current + cache_reserve_[static_cast<std::size_t>(slot)] > st.peak) [[unlikely]]
      new_peak(st, slot);
  }

  [[gnu::noinline]] void new_peak(Stat& st, int slot);

  // The statistics with every cache's share added (caches locked).
  AllocatorStats with_cache_shares() const;

  static void add_share(AllocatorStats& stats, const ThreadCache& c);

  // Moves a cache's share into the allocator's statistics (cache locked).
  void fold_share(ThreadCache& c);

  // These two with every cache locked (CacheLocks).
  void fold_caches_locked();

  void reclaim_budget(ThreadCache& c);  // its budget back (cache locked)
  void reclaim_budgets_locked();

  // A cache was short of budget: the headroom under every peak is shared
  // again among the caches used since the last sharing; what does not
  // divide goes to `caller`'s.
  void rebalance(ThreadCache* caller);

  // A block out of a magazine (its cache unlocked) back into its pool.
  void return_to_pool(Block* b);

  // Every magazine back into the pools; whether any block was there.
  bool flush_magazines();

  // Caches whose threads exited: their live blocks move to the allocator's
  // map, their magazines to the pools, their shares to its statistics.
  void adopt_orphans();

  Block* obtain(Pool& pool, std::size_t size, std::size_t bytes) {
    if (config_.expandable_segments) return obtain_expandable(pool, size, bytes);
    if (Block* b = take_free_block(pool, size)) return b;
    // Blocks in magazines may merge into one that fits: before growing.
    if (!caches_.empty() && flush_magazines())
      if (Block* b = take_free_block(pool, size)) return b;
    return grow(pool, size, bytes);
  }

  // A free block counts as an "inactive split" (PyTorch's non-releasable
  // memory) when it is a piece of a segment rather than a whole one; in a
  // growing range, every free block but the open end.
  static bool is_split(const Block* b) {
    return b->segment->expandable ? b->next != nullptr : (b->prev != nullptr || b->next != nullptr);
  }

  void index_free(Block* b) {
    b->segment->pool->free.insert(b);
    if (is_split(b)) {
      raise(CachedStat::kInactiveSplit, b->segment->pool->kind, 1);
      raise(CachedStat::kInactiveSplitBytes, b->segment->pool->kind, i64(b->size));
    }
  }

  void unindex_free(Block* b) {
    b->segment->pool->free.erase(b);
    if (is_split(b)) {
      decrease(stats_.inactive_split, b->segment->pool->kind, 1);
      decrease(stats_.inactive_split_bytes, b->segment->pool->kind, i64(b->size));
    }
  }

  // Best fit in the pool, under PyTorch's oversize rules: a block of at least
  // max_split_size is not cut down for a smaller request, and a request that
  // big does not take a block much larger than itself. The block comes back
  // marked allocated, out of the free index.
  Block* take_free_block(Pool& pool, std::size_t size) {
    Block* b = pool.free.best_fit(size);
    if (!b) return nullptr;
    if (!b->segment->expandable) {
      if (size < config_.max_split_size && b->size >= config_.max_split_size) return nullptr;
      if (size >= config_.max_split_size && b->size >= size + config_.oversize_slack) return nullptr;
    }
    unindex_free(b);
    b->allocated = true;
    return b;
  }

  bool should_split(const Block* b, std::size_t size) const {
    std::size_t remaining = b->size - size;
    if (b->segment->pool->kind == PoolKind::kSmall) return remaining >= config_.round_bytes;
    if (b->segment->expandable)
      return remaining > config_.large_split_remainder || (remaining > 0 && b->next == nullptr);
    return size < config_.max_split_size && remaining > config_.large_split_remainder;
  }

  void split(Block* b, std::size_t size) {
    if (!should_split(b, size)) return;
    Block* rest = arena_.make();
    rest->address = b->address + size;
    rest->size = b->size - size;
    rest->segment = b->segment;
    rest->prev = b;
    rest->next = b->next;
    rest->freed_at = b->freed_at;
    if (b->next) b->next->prev = rest;
    b->next = rest;
    b->size = size;
    index_free(rest);
  }

  // The block is free for reuse: into the freeing thread's magazine when
  // given one with room, otherwise merged with free neighbours and cached.
  void free_block(Block* b, ThreadCache* magazine = nullptr) {
    const PoolKind kind = b->segment->pool->kind;
    decrease(stats_.active, kind, 1);
    decrease(stats_.active_bytes, kind, i64(b->size));
    history_.record(HistoryAction::kFreeCompleted, b->address, b->size, b->size, b->segment->pool->stream, b->tag);
    b->stream_uses.clear();
    b->tag = kNoTag;
    b->requested = 0;
    if (magazine && b->size < config_.max_split_size && put_in_magazine(*magazine, b)) {
      // As cache() would count it (after the cache's lock: raise() may take
      // every cache's lock).
      if (b->split_when_cached) {
        raise(CachedStat::kInactiveSplit, kind, 1);
        raise(CachedStat::kInactiveSplitBytes, kind, i64(b->size));
      }
      return;
    }
    cache(b);
  }

  bool put_in_magazine(ThreadCache& magazine, Block* b);

  // Merges a free block with free neighbours and puts it in its pool.
  void cache(Block* b) {
    if (b->prev && b->prev->is_free()) {
      Block* prev = b->prev;
      unindex_free(prev);
      prev->size += b->size;
      prev->next = b->next;
      if (b->next) b->next->prev = prev;
      arena_.recycle(b);
      b = prev;
    }
    if (b->next && b->next->is_free()) {
      Block* next = b->next;
      unindex_free(next);
      b->size += next->size;
      b->next = next->next;
      if (next->next) next->next->prev = b;
      arena_.recycle(next);
    }
    b->freed_at = ++clock_;
    index_free(b);
  }

  void process_events(bool wait);

  // ---- growth: new segments ------------------------------------------------

  std::size_t segment_size(std::size_t size, PoolKind kind) const;

  // Times a large request of this size needed a new segment; counted in
  // grow(), forgotten all at once past 65,536 sizes so that a job with
  // endless shapes cannot grow the table.
  static constexpr std::uint32_t kGrowthsBeforePairs = 3;
  std::uint32_t growths(std::size_t size) const {
    const auto it = growths_by_size_.find(size);
    return it == growths_by_size_.end() ? 0 : it->second;
  }
  void count_growth(std::size_t size) {
    if (growths_by_size_.size() >= 65536) growths_by_size_.clear();
    ++growths_by_size_[size];
  }

  std::size_t reserved() const { return static_cast<std::size_t>(stats_.reserved_bytes[kStatAll].current); }

  void note_reserved() { high_water_ = std::max(high_water_, reserved()); }

  Block* grow(Pool& pool, std::size_t size, std::size_t bytes);

  // Garbage collection and the high-water guard, before reserving more.
  void prepare_to_reserve(std::size_t more);

  Block* try_new_segment(Pool& pool, std::size_t bytes);

  // ---- growth: expandable segments ----------------------------------------

  Block* obtain_expandable(Pool& pool, std::size_t size, std::size_t bytes);

  // Unmapped bytes under `size` bytes placed at `at`.
  std::size_t new_granule_bytes(const Segment& s, std::uintptr_t at, std::size_t size) const;

  // Best fit can pick a block whose granules are unmapped while another free
  // block, or another part of the same one, lies over mapped granules: a
  // block freed beside a live one keeps its granules mapped at that side.
  // Each free block is tried at its start, at its end, and at the granule
  // boundaries nearest them; the fewest new granules win, then best fit's
  // choice. For requests of whole granules, the fewest granules touched
  // come second: such a block need not straddle a boundary and share a
  // granule with a neighbour (for other sizes this tiebreak only moved
  // blocks off best fit, measured on bench/alloc_workloads). `taken` is best
  // fit's choice, already out of the free index, and `needed` the unmapped
  // bytes at its start. Returns exactly `size` bytes, out of the index,
  // with `needed` updated.
  Block* fewest_new_granules(Pool& pool, Block* taken, std::size_t size, std::size_t& needed);

  // Splits a block that is out of the free index at `at`, and returns the
  // part from `at` on, allocated; the front goes back to the cache.
  Block* carve_at(Block* b, std::uintptr_t at);

  void create_range(Pool& pool, std::size_t bytes);

  std::size_t unmapped_bytes(const Segment& s, std::uintptr_t first, std::uintptr_t last) const;

  // Maps every unmapped granule in [first, last), one call per run.
  bool try_map(Segment& s, std::uintptr_t first, std::uintptr_t last);

  // Unmaps the mapped granules in [first, last); returns the bytes unmapped.
  // The free tail of a range can span millions of unmapped granules: runs
  // are found with std::find over the flags (a memchr), not granule by
  // granule.
  std::size_t unmap_range(Segment& s, std::uintptr_t first, std::uintptr_t last);

  // Granules wholly inside a free block; the ends it shares with a neighbour
  // stay mapped.
  std::size_t unmap_free_block(Block* b);

  // ---- giving memory back ---------------------------------------------------

  void release_segment(Segment* s);

  // Gives cached memory back until reserved() <= target: whole free
  // segments, and free granules of expandable ranges. `oldest` picks the
  // least recently freed first (garbage collection); otherwise the largest
  // first, for the fewest upstream calls.
  void release_cached(std::size_t target, bool oldest);

  void release_all_cached();

  // ---- out of memory --------------------------------------------------------

  [[noreturn]] void out_of_memory(std::size_t bytes, StreamId stream, std::string_view why);
  // Walks every block: for out-of-memory messages and monitoring only.
  FreeSpace free_space_locked() const;

  Upstream up_;
  const AllocatorConfig& config_;
  const TagTable& tags_;
  mutable std::mutex mutex_;
  detail::NodePool nodes_;  // free-index nodes
  BlockArena arena_;
  detail::PointerMap<Block*> live_;
  std::vector<std::unique_ptr<StreamPools>> pools_;
  StreamPools* last_pools_ = nullptr;
  std::map<std::uintptr_t, std::unique_ptr<Segment>> segments_;
  std::vector<PendingFree> pending_;
  AllocatorStats stats_;
  History history_;
  std::size_t high_water_ = 0;
  std::size_t limit_ = SIZE_MAX;
  std::uint64_t clock_ = 0;
  std::unordered_map<std::size_t, std::uint32_t> growths_by_size_;  // see segment_size()
  // Thread caches (thread_cache.h); the vector and the counters below are
  // under mutex_.
  const std::uint64_t id_ = next_allocator_number();
  std::atomic<bool> caches_on_{false};
  const void* first_thread_ = nullptr;  // this_thread_key() of the first caller
  std::vector<std::shared_ptr<ThreadCache>> caches_;
  // Per slot: the sum over caches of delta + budget.
  std::array<std::int64_t, detail::kSlots> cache_reserve_{};
};

}  // namespace gpumem::alloc
