#include "alloc/thread_cache.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace gpumem::alloc::detail {
namespace {

// Set when the thread's Registry is destroyed. Trivially destructible, so
// it can still be read by destructors of thread-local objects made before
// the registry, which run after it and may free memory: those calls then
// take the allocator's plain path.
thread_local bool registry_gone = false;

// The calling thread's caches, one per allocator it used. At thread exit
// each is marked orphaned; its allocator takes back what it holds at its
// next slow path that walks the caches.
struct Registry {
  std::uint64_t last_allocator = 0;
  ThreadCache* last = nullptr;
  std::vector<std::pair<std::uint64_t, std::shared_ptr<ThreadCache>>> caches;

  ~Registry() {
    registry_gone = true;
    for (auto& [allocator, cache] : caches) {
      cache->lock.lock();
      cache->orphaned = true;
      cache->lock.unlock();
    }
  }
};

thread_local Registry registry;

}  // namespace

ThreadCache* this_threads_cache(std::uint64_t allocator) noexcept {
  if (registry_gone) return nullptr;
  Registry& r = registry;
  if (r.last_allocator == allocator) return r.last;
  for (auto& [id, cache] : r.caches)
    if (id == allocator) {
      r.last_allocator = id;
      r.last = cache.get();
      return r.last;
    }
  return nullptr;
}

bool register_this_threads_cache(std::uint64_t allocator, std::shared_ptr<ThreadCache> cache) {
  if (registry_gone) return false;
  Registry& r = registry;
  std::erase_if(r.caches, [](const auto& entry) { return entry.second->dead.load(std::memory_order_acquire); });
  r.caches.emplace_back(allocator, std::move(cache));
  r.last_allocator = allocator;
  r.last = r.caches.back().second.get();
  return true;
}

}  // namespace gpumem::alloc::detail
