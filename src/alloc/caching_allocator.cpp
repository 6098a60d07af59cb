// The caching allocator. The hot path (a cached block of the right size
// exists) is: one lock, a best-fit lookup in the stream's pool, a split, a
// pointer-map insert. Segment growth, releasing cache, events and
// out-of-memory explanations are kept out of it, in the functions below it.
#include "gpumem/alloc/caching_allocator.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <ostream>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "alloc/blocks.h"
#include "alloc/free_index.h"
#include "alloc/pointer_map.h"
#include "alloc/thread_cache.h"
#include "gpumem/alloc/simulated_device.h"
#include "gpumem/common/error.h"
#include "gpumem/common/units.h"

namespace gpumem::alloc {

using detail::Block;
using detail::BlockArena;
using detail::CachedStat;
using detail::Pool;
using detail::Segment;
using detail::StatChange;
using detail::ThreadCache;

Upstream simulated_upstream(SimulatedDevice& device) {
  return Upstream{&device, &device, &device, device.physical_capacity()};
}

namespace {

constexpr std::size_t kMaxRequest = std::size_t{1} << 60;

std::size_t round_up(std::size_t n, std::size_t m) { return (n + m - 1) / m * m; }
std::int64_t i64(std::size_t n) { return static_cast<std::int64_t>(n); }

// Thread caches find their allocator by number: an address can be reused by
// the next allocator, a number cannot.
std::uint64_t next_allocator_number() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

// Tells threads apart in a few instructions (std::this_thread::get_id() is
// a call): a new thread may reuse an exited one's key, which only delays
// thread caches.
const void* this_thread_key() {
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

}  // namespace

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
    if (bytes > kMaxRequest) {
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

  [[gnu::noinline]] ThreadCache* cache_for_this_thread_slowly() {
    if (!caches_on_.load(std::memory_order_relaxed)) {
      if (config_.history_capacity > 0) return nullptr;
      const void* me = this_thread_key();
      if (first_thread_ == nullptr) first_thread_ = me;
      if (first_thread_ == me) return nullptr;
      caches_on_.store(true, std::memory_order_release);
    }
    if (ThreadCache* cache = detail::this_threads_cache(id_)) return cache;
    auto cache = std::make_shared<ThreadCache>();
    if (!detail::register_this_threads_cache(id_, cache)) return nullptr;  // the thread is exiting
    caches_.push_back(cache);
    return cache.get();
  }

  // A block of exactly `size` from the thread's magazine, back as a pool
  // block that was just taken (allocated, not in the free index).
  Block* take_from_magazine(ThreadCache& cache, std::size_t size, StreamId stream) {
    Block* b = nullptr;
    {
      std::lock_guard cache_lock(cache.lock);
      const int i = cache.find(size, stream);
      if (i < 0) return nullptr;
      b = cache.take(i);
      b->in_thread_cache = false;
    }
    uncount_magazine_block(b);
    return b;
  }

  // A block leaving a magazine stops counting as a free piece of a segment
  // (free_block() counted it going in, as cache() would have).
  void uncount_magazine_block(const Block* b) {
    if (!b->split_when_cached) return;
    decrease(stats_.inactive_split, b->segment->pool->kind, 1);
    decrease(stats_.inactive_split_bytes, b->segment->pool->kind, i64(b->size));
  }

  // A live block by address, from the allocator's map or a thread cache's
  // (the caller holds every cache's lock), or nullptr.
  Block* find_live(std::uintptr_t address) {
    if (Block** found = live_.find(address)) return *found;
    for (const auto& c : caches_)
      if (Block** found = c->live.find(address)) return *found;
    return nullptr;
  }

  // The same, taken out of its map.
  Block* take_live(std::uintptr_t address) {
    if (Block** found = live_.find(address)) {
      Block* b = *found;
      live_.erase(address);
      return b;
    }
    for (const auto& c : caches_) {
      std::lock_guard cache_lock(c->lock);
      if (Block** found = c->live.find(address)) {
        Block* b = *found;
        c->live.erase(address);
        return b;
      }
    }
    return nullptr;
  }

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

  [[gnu::noinline]] void new_peak(Stat& st, int slot) {
    // Every budget back (frees on fast paths grow them too), under every
    // cache's lock at once, so that the reserve is then exactly the caches'
    // deltas at one moment.
    CacheLocks caches(caches_);
    reclaim_budgets_locked();
    st.peak = std::max(st.peak, st.current + cache_reserve_[static_cast<std::size_t>(slot)]);
  }

  // The statistics with every cache's share added (caches locked).
  AllocatorStats with_cache_shares() const {
    AllocatorStats out = stats_;
    for (const auto& c : caches_) add_share(out, *c);
    return out;
  }

  static void add_share(AllocatorStats& stats, const ThreadCache& c) {
    for (int w = 0; w < detail::kCachedStats; ++w)
      for (int entry = 0; entry < 3; ++entry) {
        const auto slot = static_cast<std::size_t>(ThreadCache::slot(CachedStat(w), entry));
        Stat& st = detail::stat_array(stats, CachedStat(w))[static_cast<std::size_t>(entry)];
        st.current += c.delta[slot];
        st.allocated += c.increased[slot];
        st.freed += c.decreased[slot];
      }
  }

  // Moves a cache's share into the allocator's statistics (cache locked).
  void fold_share(ThreadCache& c) {
    add_share(stats_, c);
    for (std::size_t slot = 0; slot < c.delta.size(); ++slot) cache_reserve_[slot] -= c.delta[slot];
    c.delta.fill(0);
    c.increased.fill(0);
    c.decreased.fill(0);
  }

  // These two with every cache locked (CacheLocks).
  void fold_caches_locked() {
    for (const auto& c : caches_) fold_share(*c);
  }

  void reclaim_budgets_locked() {
    for (const auto& c : caches_) {
      for (std::size_t slot = 0; slot < c->budget.size(); ++slot) cache_reserve_[slot] -= c->budget[slot];
      c->budget.fill(0);
    }
  }

  // A cache was short of budget: the headroom under every peak is shared
  // again among the caches used since the last sharing; what does not
  // divide goes to `caller`'s.
  void rebalance(ThreadCache* caller) {
    adopt_orphans();
    CacheLocks caches(caches_);
    fold_caches_locked();
    reclaim_budgets_locked();
    std::vector<ThreadCache*> users;
    for (const auto& c : caches_) {
      if (c->calls > 0 || c.get() == caller) users.push_back(c.get());
      c->calls = 0;
    }
    if (users.empty()) return;
    const auto n = static_cast<std::int64_t>(users.size());
    for (int w = 0; w < detail::kCachedStats; ++w)
      for (int entry = 0; entry < 3; ++entry) {
        const auto slot = static_cast<std::size_t>(ThreadCache::slot(CachedStat(w), entry));
        const Stat& st = detail::stat_array(stats_, CachedStat(w))[static_cast<std::size_t>(entry)];
        const std::int64_t headroom = st.peak - st.current - cache_reserve_[slot];
        if (headroom <= 0) continue;
        for (ThreadCache* c : users) c->budget[slot] += headroom / n;
        if (caller) caller->budget[slot] += headroom % n;
        cache_reserve_[slot] += caller ? headroom : headroom / n * n;
      }
  }

  // A block out of a magazine (its cache unlocked) back into its pool.
  void return_to_pool(Block* b) {
    b->in_thread_cache = false;
    b->allocated = false;
    uncount_magazine_block(b);  // cache() counts it again
    cache(b);
  }

  // Every magazine back into the pools; whether any block was there.
  bool flush_magazines() {
    adopt_orphans();
    std::vector<Block*> flushed;
    for (const auto& c : caches_) {
      std::lock_guard cache_lock(c->lock);
      while (c->count > 0) flushed.push_back(c->take(c->count - 1));
    }
    for (Block* b : flushed) return_to_pool(b);
    return !flushed.empty();
  }

  // Caches whose threads exited: their live blocks move to the allocator's
  // map, their magazines to the pools, their shares to its statistics.
  void adopt_orphans() {
    std::vector<Block*> flushed;
    std::erase_if(caches_, [&](const std::shared_ptr<ThreadCache>& c) {
      std::lock_guard cache_lock(c->lock);
      if (!c->orphaned) return false;
      c->live.for_each([&](std::uintptr_t address, Block* b) { live_.insert(address, b); });
      while (c->count > 0) flushed.push_back(c->take(c->count - 1));
      fold_share(*c);
      for (std::size_t slot = 0; slot < c->budget.size(); ++slot) cache_reserve_[slot] -= c->budget[slot];
      c->dead.store(true, std::memory_order_release);
      return true;
    });
    for (Block* b : flushed) return_to_pool(b);
  }

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

  bool put_in_magazine(ThreadCache& magazine, Block* b) {
    std::lock_guard cache_lock(magazine.lock);
    if (!magazine.has_room(*b)) return false;
    b->allocated = true;  // out of the pool: no neighbour merges it
    b->in_thread_cache = true;
    b->split_when_cached = is_split(b);
    magazine.put(b);
    return true;
  }

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

  void process_events(bool wait) {
    if (wait && !pending_.empty()) ++stats_.num_sync_all_streams;
    std::size_t kept = 0;
    for (PendingFree& p : pending_) {
      if (wait) up_.events->synchronize(p.event);
      if (!wait && !up_.events->query(p.event)) {
        pending_[kept++] = p;
        continue;
      }
      up_.events->destroy(p.event);
      if (--p.block->pending_events == 0) free_block(p.block);
    }
    pending_.resize(kept);
  }

  // ---- growth: new segments ------------------------------------------------

  std::size_t segment_size(std::size_t size, PoolKind kind) const {
    if (kind == PoolKind::kSmall) return config_.small_segment;
    const std::size_t exact = round_up(size, config_.large_round);
    if (config_.large_segment && size < config_.min_large_alloc) {
      // A roomy segment lets later requests share it. Under the high-water
      // guard it is taken only when it does not raise the peak, or when an
      // exact segment would waste over a quarter of the request in rounding
      // (the remainder of a large block under 1 MiB serves no one).
      const std::size_t roomy = std::max(config_.large_segment, size);
      if (!config_.release_before_new_peak || reserved() + roomy <= high_water_ || (exact - size) * 4 > size)
        return roomy;
      // An exact segment whose tail is too short to split off is waste
      // for as long as it lives. When this size needed new segments three
      // times before (tensors of one shape come in numbers: ViT-B/16's
      // weights, gradients and AdamW states of 9 MiB are 96), a segment
      // for two wastes less per request. On the real traces this takes
      // ViT-B/16 from 1,356 to 1,298 MiB, under PyTorch's 1,326; fewer
      // growths before pairing cost more on resnet50 inference than they
      // save elsewhere (measured with bench/default_vs_pytorch.sh).
      const std::size_t tail = exact - size;
      if (tail > 0 && tail <= config_.large_split_remainder && growths(size) >= kGrowthsBeforePairs) {
        const std::size_t pair = round_up(2 * size, config_.large_round);
        if (pair - 2 * size < 2 * tail) return pair;
      }
    }
    return exact;
  }

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

  Block* grow(Pool& pool, std::size_t size, std::size_t bytes) {
    const std::size_t wanted = segment_size(size, pool.kind);
    if (pool.kind == PoolKind::kLarge) count_growth(size);
    // When a roomy segment does not fit, one just big enough may.
    const std::size_t least = pool.kind == PoolKind::kSmall ? wanted : round_up(size, config_.large_round);
    prepare_to_reserve(wanted);
    if (Block* b = try_new_segment(pool, wanted)) return b;
    if (least < wanted && config_.release_before_new_peak)
      if (Block* b = try_new_segment(pool, least)) return b;
    ++stats_.num_alloc_retries;
    release_all_cached();
    if (Block* b = try_new_segment(pool, wanted)) return b;
    if (least < wanted && config_.release_before_new_peak)
      if (Block* b = try_new_segment(pool, least)) return b;
    out_of_memory(bytes, pool.stream, "");
  }

  // Garbage collection and the high-water guard, before reserving more.
  void prepare_to_reserve(std::size_t more) {
    if (config_.garbage_collection_threshold > 0 && up_.capacity) {
      auto threshold = static_cast<std::size_t>(config_.garbage_collection_threshold * double(up_.capacity));
      if (reserved() + more > threshold) release_cached(threshold > more ? threshold - more : 0, /*oldest=*/true);
    }
    if (config_.release_before_new_peak && reserved() + more > high_water_)
      release_cached(high_water_ > more ? high_water_ - more : 0, /*oldest=*/false);
  }

  Block* try_new_segment(Pool& pool, std::size_t bytes) {
    if (reserved() + bytes > limit_) return nullptr;
    void* p = nullptr;
    try {
      p = up_.memory->allocate(bytes, pool.stream);
    } catch (const OutOfMemoryError&) {
      return nullptr;
    }
    ++stats_.num_device_alloc;
    auto segment = std::make_unique<Segment>();
    segment->base = reinterpret_cast<std::uintptr_t>(p);
    segment->size = bytes;
    segment->pool = &pool;
    Block* b = arena_.make();
    b->address = segment->base;
    b->size = bytes;
    b->segment = segment.get();
    b->allocated = true;
    segment->first = b;
    increase(stats_.segment, pool.kind, 1);
    increase(stats_.reserved_bytes, pool.kind, i64(bytes));
    if (bytes >= config_.max_split_size) stats_.oversize_segments.increase(1);
    note_reserved();
    history_.record(HistoryAction::kSegmentAlloc, segment->base, bytes, bytes, pool.stream, kNoTag);
    segments_.emplace(segment->base, std::move(segment));
    return b;
  }

  // ---- growth: expandable segments ----------------------------------------

  Block* obtain_expandable(Pool& pool, std::size_t size, std::size_t bytes) {
    if (pool.ranges == 0) create_range(pool, size);
    Block* b = take_free_block(pool, size);
    if (!b) {
      // Holes left no stretch of address space long enough: open another
      // range (address space is cheap; memory is only what gets mapped).
      create_range(pool, size);
      b = take_free_block(pool, size);
    }
    if (!b) out_of_memory(bytes, pool.stream, "no virtual address range is long enough");
    std::size_t needed = new_granule_bytes(*b->segment, b->address, size);
    if (needed == 0) return b;
    // Blocks in magazines may merge into mapped room: before mapping more.
    if (!caches_.empty() && flush_magazines()) {
      b->allocated = false;
      cache(b);
      b = take_free_block(pool, size);  // b's own room at least
      if (!b) out_of_memory(bytes, pool.stream, "no virtual address range is long enough");
      needed = new_granule_bytes(*b->segment, b->address, size);
      if (needed == 0) return b;
    }
    // Memory must be mapped: off the hot path, so the high-water guard looks
    // for the free block and the place in it that need the fewest new
    // granules (PyTorch maps what best fit chose).
    if (config_.release_before_new_peak) b = fewest_new_granules(pool, b, size, needed);
    // The rest of the block goes back to the cache before mapping, so the
    // high-water guard can unmap it instead of growing past the peak.
    split(b, size);
    const std::size_t g = up_.vmm->granularity();
    const std::size_t first = b->address / g * g, last = round_up(b->address + size, g);
    prepare_to_reserve(needed);
    if (reserved() + needed <= limit_ && try_map(*b->segment, first, last)) return b;
    ++stats_.num_alloc_retries;
    release_all_cached();
    needed = unmapped_bytes(*b->segment, first, last);
    if (reserved() + needed <= limit_ && try_map(*b->segment, first, last)) return b;
    // Back to the cache; a neighbour may have become free meanwhile (a
    // pending free completed while the cache was released).
    b->allocated = false;
    cache(b);
    out_of_memory(bytes, pool.stream, "");
  }

  // Unmapped bytes under `size` bytes placed at `at`.
  std::size_t new_granule_bytes(const Segment& s, std::uintptr_t at, std::size_t size) const {
    const std::size_t g = up_.vmm->granularity();
    return unmapped_bytes(s, at / g * g, round_up(at + size, g));
  }

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
  Block* fewest_new_granules(Pool& pool, Block* taken, std::size_t size, std::size_t& needed) {
    const std::size_t g = up_.vmm->granularity();
    auto touched = [&](std::uintptr_t at) { return (round_up(at + size, g) - at / g * g) / g; };
    Block* best = taken;
    std::uintptr_t best_at = taken->address;
    std::size_t best_touched = touched(best_at);
    auto consider = [&](Block* b) {
      const std::uintptr_t end = b->address + b->size - size;
      const std::uintptr_t aligned_start = round_up(b->address, g), aligned_end = end / g * g;
      for (std::uintptr_t at : {b->address, end, aligned_start, aligned_end}) {
        if (at < b->address || at > end) continue;
        const std::size_t n = new_granule_bytes(*b->segment, at, size), t = touched(at);
        if (n < needed || (size % g == 0 && n == needed && t < best_touched)) {
          needed = n;
          best_touched = t;
          best = b;
          best_at = at;
        }
      }
    };
    consider(taken);
    for (auto& [base, s] : segments_) {
      if (!s->expandable || s->pool != &pool || s->mapped_bytes == 0) continue;
      for (Block* b = s->first; b; b = b->next)
        if (b->is_free() && b->size >= size && b != taken) consider(b);
    }
    if (best != taken) {
      taken->allocated = false;
      index_free(taken);
      unindex_free(best);
      best->allocated = true;
    }
    return best_at == best->address ? best : carve_at(best, best_at);
  }

  // Splits a block that is out of the free index at `at`, and returns the
  // part from `at` on, allocated; the front goes back to the cache.
  Block* carve_at(Block* b, std::uintptr_t at) {
    Block* rest = arena_.make();
    rest->address = at;
    rest->size = b->address + b->size - at;
    rest->segment = b->segment;
    rest->prev = b;
    rest->next = b->next;
    rest->allocated = true;
    if (b->next) b->next->prev = rest;
    b->next = rest;
    b->size = at - b->address;
    b->allocated = false;
    index_free(b);
    return rest;
  }

  void create_range(Pool& pool, std::size_t bytes) {
    const std::size_t g = up_.vmm->granularity();
    // Twice the device: the range can hold the device's worth of memory even
    // after holes were unmapped along the way.
    std::size_t span = std::min(limit_, up_.capacity ? up_.capacity : std::size_t{1} << 40);
    span = round_up(std::max(span, bytes), g) * 2;
    std::uintptr_t base = 0;
    try {
      base = up_.vmm->reserve(span);
    } catch (const OutOfMemoryError&) {
      out_of_memory(bytes, pool.stream, "no virtual address space left for an expandable segment");
    }
    auto segment = std::make_unique<Segment>();
    segment->base = base;
    segment->size = span;
    segment->pool = &pool;
    segment->expandable = true;
    segment->mapped.assign(span / g, 0);
    Block* b = arena_.make();
    b->address = base;
    b->size = span;
    b->segment = segment.get();
    segment->first = b;
    ++pool.ranges;
    increase(stats_.segment, pool.kind, 1);
    segments_.emplace(base, std::move(segment));
    index_free(b);
  }

  std::size_t unmapped_bytes(const Segment& s, std::uintptr_t first, std::uintptr_t last) const {
    const std::size_t g = up_.vmm->granularity();
    std::size_t n = 0;
    for (std::uintptr_t a = first; a < last; a += g) n += s.mapped[(a - s.base) / g] ? 0 : g;
    return n;
  }

  // Maps every unmapped granule in [first, last), one call per run.
  bool try_map(Segment& s, std::uintptr_t first, std::uintptr_t last) {
    const std::size_t g = up_.vmm->granularity();
    for (std::uintptr_t a = first; a < last;) {
      if (s.mapped[(a - s.base) / g]) {
        a += g;
        continue;
      }
      std::uintptr_t run_end = a;
      while (run_end < last && !s.mapped[(run_end - s.base) / g]) run_end += g;
      try {
        up_.vmm->map(a, run_end - a);
      } catch (const OutOfMemoryError&) {
        return false;
      }
      std::fill(s.mapped.begin() + long((a - s.base) / g), s.mapped.begin() + long((run_end - s.base) / g), 1);
      s.mapped_bytes += run_end - a;
      ++stats_.num_device_alloc;
      increase(stats_.reserved_bytes, s.pool->kind, i64(run_end - a));
      note_reserved();
      history_.record(HistoryAction::kSegmentMap, a, run_end - a, run_end - a, s.pool->stream, kNoTag);
      a = run_end;
    }
    return true;
  }

  // Unmaps the mapped granules in [first, last); returns the bytes unmapped.
  // The free tail of a range can span millions of unmapped granules: runs
  // are found with std::find over the flags (a memchr), not granule by
  // granule.
  std::size_t unmap_range(Segment& s, std::uintptr_t first, std::uintptr_t last) {
    const std::size_t g = up_.vmm->granularity();
    first = std::max(first, s.base);
    last = std::min(last, s.base + s.size);
    if (first >= last || s.mapped_bytes == 0) return 0;
    const auto begin = s.mapped.begin();
    const auto end = begin + long((last - s.base + g - 1) / g);
    std::size_t total = 0;
    for (auto at = std::find(begin + long((first - s.base) / g), end, std::uint8_t{1}); at != end;
         at = std::find(at, end, std::uint8_t{1})) {
      const auto run_end = std::find(at, end, std::uint8_t{0});
      const std::uintptr_t a = s.base + std::size_t(at - begin) * g;
      const std::uintptr_t bytes = std::size_t(run_end - at) * g;
      up_.vmm->unmap(a, bytes);
      std::fill(at, run_end, std::uint8_t{0});
      s.mapped_bytes -= bytes;
      total += bytes;
      ++stats_.num_device_free;
      decrease(stats_.reserved_bytes, s.pool->kind, i64(bytes));
      history_.record(HistoryAction::kSegmentUnmap, a, bytes, bytes, s.pool->stream, kNoTag);
      at = run_end;
    }
    return total;
  }

  // Granules wholly inside a free block; the ends it shares with a neighbour
  // stay mapped.
  std::size_t unmap_free_block(Block* b) {
    const std::size_t g = up_.vmm->granularity();
    return unmap_range(*b->segment, round_up(b->address, g), (b->address + b->size) / g * g);
  }

  // ---- giving memory back ---------------------------------------------------

  void release_segment(Segment* s) {
    Block* b = s->first;
    unindex_free(b);
    const PoolKind kind = s->pool->kind;
    up_.memory->deallocate(reinterpret_cast<void*>(s->base), s->size, s->pool->stream);
    ++stats_.num_device_free;
    decrease(stats_.segment, kind, 1);
    decrease(stats_.reserved_bytes, kind, i64(s->size));
    if (s->size >= config_.max_split_size) stats_.oversize_segments.decrease(1);
    history_.record(HistoryAction::kSegmentFree, s->base, s->size, s->size, s->pool->stream, kNoTag);
    arena_.recycle(b);
    segments_.erase(s->base);
  }

  // Gives cached memory back until reserved() <= target: whole free
  // segments, and free granules of expandable ranges. `oldest` picks the
  // least recently freed first (garbage collection); otherwise the largest
  // first, for the fewest upstream calls.
  void release_cached(std::size_t target, bool oldest) {
    std::vector<Block*> candidates;
    for (auto& [base, s] : segments_) {
      if (!s->expandable) {
        if (s->first->is_free() && s->first->next == nullptr) candidates.push_back(s->first);
        continue;
      }
      for (Block* b = s->first; b; b = b->next)
        if (b->is_free()) candidates.push_back(b);
    }
    if (oldest)
      std::sort(candidates.begin(), candidates.end(), [](Block* a, Block* b) { return a->freed_at < b->freed_at; });
    else
      std::sort(candidates.begin(), candidates.end(), [](Block* a, Block* b) { return a->size > b->size; });
    for (Block* b : candidates) {
      if (reserved() <= target) break;
      if (b->segment->expandable)
        unmap_free_block(b);
      else
        release_segment(b->segment);
    }
  }

  void release_all_cached() {
    flush_magazines();
    process_events(/*wait=*/true);
    release_cached(0, /*oldest=*/false);
    // Ranges with nothing left in them go back too.
    std::vector<Segment*> empty;
    for (auto& [base, s] : segments_)
      if (s->expandable && s->first->is_free() && s->first->next == nullptr) empty.push_back(s.get());
    for (Segment* s : empty) {
      unmap_range(*s, s->base, s->base + s->size);
      unindex_free(s->first);
      up_.vmm->release(s->base, s->size);
      decrease(stats_.segment, s->pool->kind, 1);
      --s->pool->ranges;
      arena_.recycle(s->first);
      segments_.erase(s->base);
    }
  }

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

FreeSpace CachingAllocator::Impl::free_space_locked() const {
  // What could be handed out without new device memory: free blocks'
  // mapped bytes.
  std::size_t largest_free = 0, total_free = 0;
  for (auto& [base, s] : segments_) {
    for (Block* b = s->first; b; b = b->next) {
      if (!b->is_free() && !b->in_thread_cache) continue;
      std::size_t usable = b->size;
      if (s->expandable) {
        const std::size_t g = up_.vmm->granularity();
        usable = 0;
        std::size_t run = 0;
        for (std::uintptr_t a = round_up(b->address, g); a + g <= b->address + b->size; a += g) {
          run = s->mapped[(a - s->base) / g] ? run + g : 0;
          usable += s->mapped[(a - s->base) / g] ? g : 0;
          largest_free = std::max(largest_free, run);
        }
      } else {
        largest_free = std::max(largest_free, b->size);
      }
      total_free += usable;
    }
  }
  return FreeSpace{total_free, largest_free};
}

void CachingAllocator::Impl::out_of_memory(std::size_t bytes, StreamId stream, std::string_view why) {
  ++stats_.num_ooms;
  history_.record(HistoryAction::kOom, 0, bytes, bytes, stream, kNoTag);
  CacheLocks caches(caches_);
  fold_caches_locked();
  const FreeSpace space = free_space_locked();
  const std::size_t largest_free = space.largest_block, total_free = space.free_bytes;
  std::vector<Block*> live;
  live_.for_each([&](std::uintptr_t, Block* b) { live.push_back(b); });
  for (const auto& c : caches_) c->live.for_each([&](std::uintptr_t, Block* b) { live.push_back(b); });
  std::size_t shown = std::min<std::size_t>(live.size(), 5);
  std::partial_sort(live.begin(), live.begin() + long(shown), live.end(),
                    [](Block* a, Block* b) { return a->size > b->size; });
  std::string largest;
  for (std::size_t i = 0; i < shown; ++i) {
    std::string tag = tags_.name(live[i]->tag);
    largest += fmt::format("{}{} ({})", i ? ", " : "", format_bytes(live[i]->size),
                           tag.empty() ? std::string("untagged") : tag);
  }
  // The same, grouped by tag: which part of the program holds the memory.
  std::map<TagId, std::pair<std::size_t, std::size_t>> by_tag;  // bytes, count
  for (Block* b : live) {
    by_tag[b->tag].first += b->size;
    ++by_tag[b->tag].second;
  }
  std::vector<std::pair<TagId, std::pair<std::size_t, std::size_t>>> groups(by_tag.begin(), by_tag.end());
  std::sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  std::string grouped;
  for (std::size_t i = 0; i < std::min<std::size_t>(groups.size(), 5); ++i) {
    std::string tag = tags_.name(groups[i].first);
    grouped += fmt::format("{}{} {} in {}", i ? ", " : "", tag.empty() ? std::string("untagged") : tag,
                           format_bytes(groups[i].second.first), format_count(groups[i].second.second));
  }
  const std::size_t allocated = static_cast<std::size_t>(stats_.allocated_bytes[kStatAll].current);
  const double fragmentation = total_free ? 1.0 - double(largest_free) / double(total_free) : 0.0;
  std::string message = fmt::format(
      "out of memory: tried to allocate {} on stream {}{}{}; capacity {}{}, allocated {}, reserved {} "
      "({} reserved but unallocated); largest free block {}; fragmentation {:.1f}% (1 - largest free / total free); "
      "largest live allocations: {}; live by tag: {}",
      format_bytes(bytes), stream, why.empty() ? "" : ": ", why,
      up_.capacity ? format_bytes(up_.capacity) : std::string("unknown"),
      limit_ != SIZE_MAX ? fmt::format(" (reserved limit {})", format_bytes(limit_)) : std::string(),
      format_bytes(allocated), format_bytes(reserved()), format_bytes(reserved() - std::min(reserved(), allocated)),
      format_bytes(largest_free), 100.0 * fragmentation, largest.empty() ? std::string("none") : largest,
      grouped.empty() ? std::string("none") : grouped);
  if (!config_.expandable_segments && reserved() - std::min(reserved(), allocated) >= bytes)
    message += "; the memory exists but is fragmented: GPUMEM_ALLOC_CONF=expandable_segments:true avoids this";
  throw OutOfMemoryError(message, bytes);
}

Snapshot CachingAllocator::Impl::snapshot() const {
  std::lock_guard lock(mutex_);
  CacheLocks caches(caches_);
  Snapshot out;
  for (const auto& [base, s] : segments_) {
    SegmentSnapshot seg;
    seg.address = s->base;
    seg.total_size = s->reserved_bytes();
    seg.stream = s->pool->stream;
    seg.pool = s->pool->kind;
    seg.expandable = s->expandable;
    for (const Block* b = s->first; b; b = b->next) {
      BlockSnapshot block;
      block.address = b->address;
      block.size = b->size;
      block.state = b->in_thread_cache ? BlockState::kInactive
                    : b->allocated     ? BlockState::kAllocated
                                       : (b->pending_events ? BlockState::kPendingFree : BlockState::kInactive);
      if (block.state != BlockState::kInactive) {
        block.requested_size = b->requested;
        block.tag = tags_.name(b->tag);
        seg.active_size += b->size;
        seg.requested_size += b->requested;
        if (block.state == BlockState::kAllocated) seg.allocated_size += b->size;
      } else if (s->expandable) {
        const std::size_t g = up_.vmm->granularity();
        std::uintptr_t first = round_up(b->address, g), last = (b->address + b->size) / g * g;
        bool any = first < last ? false : true;  // a block inside shared granules is mapped
        for (std::uintptr_t a = first; a < last && !any; a += g) any = s->mapped[(a - s->base) / g] != 0;
        if (!any) continue;
      }
      seg.blocks.push_back(std::move(block));
    }
    out.segments.push_back(std::move(seg));
  }
  return out;
}

// ---- the public class -------------------------------------------------------

namespace {

// Before anything is built from it: the history ring alone is sized by it.
const AllocatorConfig& validated(const AllocatorConfig& config) {
  validate(config);
  return config;
}

}  // namespace

CachingAllocator::CachingAllocator(Upstream upstream, AllocatorConfig config)
    : config_(validated(config)), impl_(std::make_unique<Impl>(upstream, config_, tags_)) {}

CachingAllocator::~CachingAllocator() = default;

void* CachingAllocator::allocate_tagged(std::size_t bytes, StreamId stream, TagId tag) {
  return impl_->allocate(bytes, stream, tag);
}

FreeStatus CachingAllocator::free(void* ptr, StreamId stream) { return impl_->free(ptr, stream); }

FreeStatus CachingAllocator::record_stream(void* ptr, StreamId stream) { return impl_->record_stream(ptr, stream); }

void CachingAllocator::do_deallocate(void* ptr, std::size_t, StreamId stream) noexcept {
  if (impl_->free(ptr, stream) == FreeStatus::kUnknownPointer) {
    // As glibc does for free(): a bad pointer means memory is corrupt.
    std::fprintf(stderr, "gpumem: deallocate(%p): not a live allocation of this allocator\n", ptr);
    std::abort();
  }
}

void CachingAllocator::empty_cache() { impl_->empty_cache(); }
AllocatorStats CachingAllocator::stats() const { return impl_->stats(); }
AllocatorStats CachingAllocator::stats(FreeSpace& free_space) const { return impl_->stats(free_space); }
void CachingAllocator::reset_peak_stats() { impl_->reset_peak_stats(); }
void CachingAllocator::reset_accumulated_stats() { impl_->reset_accumulated_stats(); }
Snapshot CachingAllocator::snapshot() const { return impl_->snapshot(); }
std::string CachingAllocator::memory_summary() const { return format_memory_summary(impl_->stats()); }
std::vector<HistoryEvent> CachingAllocator::history() const { return impl_->history(); }
std::size_t CachingAllocator::capacity() const noexcept { return impl_->capacity(); }

void CachingAllocator::write_history(std::ostream& out) const {
  write_history_jsonl(out, impl_->history(), impl_->history_dropped(), tags_);
}

}  // namespace gpumem::alloc
