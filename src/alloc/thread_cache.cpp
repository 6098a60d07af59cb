#include "alloc/thread_cache.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace gpumem::alloc::detail {
namespace {

// The calling thread's caches, one per allocator it used. At thread exit
// each is marked orphaned; its allocator takes back what it holds at its
// next slow path that walks the caches.
struct Registry {
  std::uint64_t last_allocator = 0;
  ThreadCache* last = nullptr;
  std::vector<std::pair<std::uint64_t, std::shared_ptr<ThreadCache>>> caches;

  ~Registry() {
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

void register_this_threads_cache(std::uint64_t allocator, std::shared_ptr<ThreadCache> cache) {
  Registry& r = registry;
  std::erase_if(r.caches, [](const auto& entry) { return entry.second->dead.load(std::memory_order_acquire); });
  r.caches.emplace_back(allocator, std::move(cache));
  r.last_allocator = allocator;
  r.last = r.caches.back().second.get();
}

}  // namespace gpumem::alloc::detail
