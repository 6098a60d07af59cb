// Thread caches' slow paths (thread_cache.h): the calling thread's cache,
// magazines taken and flushed, budgets shared and taken back, shares folded
// into the statistics, and caches of exited threads adopted. All run under
// the allocator's mutex; fast paths are in caching_allocator_impl.h.
#include "alloc/caching_allocator_impl.h"

namespace gpumem::alloc {

ThreadCache* CachingAllocator::Impl::cache_for_this_thread_slowly() {
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

Block* CachingAllocator::Impl::take_from_magazine(ThreadCache& cache, std::size_t size, StreamId stream) {
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

Block* CachingAllocator::Impl::find_live(std::uintptr_t address) {
  if (Block** found = live_.find(address)) return *found;
  for (const auto& c : caches_)
    if (Block** found = c->live.find(address)) return *found;
  return nullptr;
}

Block* CachingAllocator::Impl::take_live(std::uintptr_t address) {
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

void CachingAllocator::Impl::new_peak(Stat& st, int slot) {
  // Every budget back (frees on fast paths grow them too), under every
  // cache's lock at once, so that the reserve is then exactly the caches'
  // deltas at one moment.
  CacheLocks caches(caches_);
  reclaim_budgets_locked();
  st.peak = std::max(st.peak, st.current + cache_reserve_[static_cast<std::size_t>(slot)]);
}

AllocatorStats CachingAllocator::Impl::with_cache_shares() const {
  AllocatorStats out = stats_;
  for (const auto& c : caches_) add_share(out, *c);
  return out;
}

void CachingAllocator::Impl::add_share(AllocatorStats& stats, const ThreadCache& c) {
  for (int w = 0; w < detail::kCachedStats; ++w)
    for (int entry = 0; entry < 3; ++entry) {
      const auto slot = static_cast<std::size_t>(ThreadCache::slot(CachedStat(w), entry));
      Stat& st = detail::stat_array(stats, CachedStat(w))[static_cast<std::size_t>(entry)];
      st.current += c.delta[slot];
      st.allocated += c.increased[slot];
      st.freed += c.decreased[slot];
    }
}

void CachingAllocator::Impl::fold_share(ThreadCache& c) {
  add_share(stats_, c);
  for (std::size_t slot = 0; slot < c.delta.size(); ++slot) cache_reserve_[slot] -= c.delta[slot];
  c.delta.fill(0);
  c.increased.fill(0);
  c.decreased.fill(0);
}

void CachingAllocator::Impl::fold_caches_locked() {
  for (const auto& c : caches_) fold_share(*c);
}

void CachingAllocator::Impl::reclaim_budget(ThreadCache& c) {
  for (std::size_t slot = 0; slot < c.budget.size(); ++slot) cache_reserve_[slot] -= c.budget[slot];
  c.budget.fill(0);
}

void CachingAllocator::Impl::reclaim_budgets_locked() {
  for (const auto& c : caches_) reclaim_budget(*c);
}

void CachingAllocator::Impl::rebalance(ThreadCache* caller) {
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

void CachingAllocator::Impl::return_to_pool(Block* b) {
  b->in_thread_cache = false;
  b->allocated = false;
  uncount_magazine_block(b);  // cache() counts it again
  cache(b);
}

bool CachingAllocator::Impl::flush_magazines() {
  adopt_orphans();
  std::vector<Block*> flushed;
  for (const auto& c : caches_) {
    std::lock_guard cache_lock(c->lock);
    c->drain(flushed);
  }
  for (Block* b : flushed) return_to_pool(b);
  return !flushed.empty();
}

void CachingAllocator::Impl::adopt_orphans() {
  std::vector<Block*> flushed;
  std::erase_if(caches_, [&](const std::shared_ptr<ThreadCache>& c) {
    std::lock_guard cache_lock(c->lock);
    if (!c->orphaned) return false;
    c->live.for_each([&](std::uintptr_t address, Block* b) { live_.insert(address, b); });
    c->drain(flushed);
    fold_share(*c);
    reclaim_budget(*c);
    c->dead.store(true, std::memory_order_release);
    return true;
  });
  for (Block* b : flushed) return_to_pool(b);
}

bool CachingAllocator::Impl::put_in_magazine(ThreadCache& magazine, Block* b) {
  std::lock_guard cache_lock(magazine.lock);
  if (!magazine.has_room(*b)) return false;
  b->allocated = true;  // out of the pool: no neighbour merges it
  b->in_thread_cache = true;
  b->split_when_cached = is_split(b);
  magazine.put(b);
  return true;
}

}  // namespace gpumem::alloc
