// RMM's pool_memory_resource as a replay policy. The behaviour follows
// rmm::mr::pool_memory_resource, detail::stream_ordered_memory_resource and
// detail::coalescing_free_list; the free list is gpumem's own: RMM keeps a
// linked list by address and scans it for the best fit, which gives the
// same block as a lookup in a (size, address) index, kept here beside the
// address map so that long free lists stay cheap.
#include "gpumem/alloc/policies/pool_resource.h"
#include "gpumem/alloc/memory_resource.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/common/units.h"

namespace gpumem::alloc {
namespace {

constexpr std::size_t kAlignment = 256;  // rmm::CUDA_ALLOCATION_ALIGNMENT

std::size_t align_up(std::size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

// A run of memory. `head`: it starts an upstream allocation, so it must not
// merge into the block before it (RMM's block::is_head).
struct Block {
  std::uintptr_t ptr = 0;
  std::size_t size = 0;
  bool head = false;
};

// RMM's coalescing_free_list: blocks by address, merged on insert with the
// neighbours they touch unless the later one is a head.
class FreeList {
 public:
  void insert(Block b) {
    auto next = by_address_.upper_bound(b.ptr);
    if (next != by_address_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second.size == b.ptr && !b.head) {
        b = Block{prev->first, prev->second.size + b.size, prev->second.head};
        erase(prev);
      }
    }
    if (next != by_address_.end() && b.ptr + b.size == next->first && !next->second.head) {
      b.size += next->second.size;
      erase(next);
    }
    by_address_.emplace(b.ptr, Entry{b.size, b.head});
    by_size_.insert({b.size, b.ptr});
  }

  // Moves every block of `other` in (RMM's insert(free_list&&)).
  void absorb(FreeList& other) {
    for (const auto& [ptr, e] : other.by_address_) insert(Block{ptr, e.size, e.head});
    other.by_address_.clear();
    other.by_size_.clear();
  }

  // RMM's get_block: the smallest block that fits, the lowest-addressed of
  // equals (what its min_element over the address-ordered list returns).
  // Removed from the list; size 0 when none fits.
  Block take_best_fit(std::size_t size) {
    auto it = by_size_.lower_bound({size, 0});
    if (it == by_size_.end()) return {};
    auto at = by_address_.find(it->second);
    Block b{at->first, at->second.size, at->second.head};
    erase(at);
    return b;
  }

  std::vector<PoolBlock> blocks() const {
    std::vector<PoolBlock> out;
    for (const auto& [ptr, e] : by_address_) out.push_back({ptr, e.size});
    return out;
  }
  std::size_t count() const { return by_address_.size(); }
  std::size_t largest() const { return by_size_.empty() ? 0 : std::prev(by_size_.end())->first; }

 private:
  struct Entry {
    std::size_t size;
    bool head;
  };
  using AddressMap = std::map<std::uintptr_t, Entry>;

  void erase(AddressMap::iterator it) {
    by_size_.erase({it->second.size, it->first});
    by_address_.erase(it);
  }

  AddressMap by_address_;
  std::set<std::pair<std::size_t, std::uintptr_t>> by_size_;
};

}  // namespace

class PoolResource::Impl {
 public:
  Impl(MemoryResource& upstream, const PoolResourceOptions& options)
      : upstream_(upstream), maximum_(options.maximum_pool_size) {
    if (options.initial_pool_size % kAlignment != 0)
      throw InputError(
          fmt::format("rmm-pool: initial pool size {} is not a multiple of 256 bytes", options.initial_pool_size));
    if (maximum_ && *maximum_ % kAlignment != 0)
      throw InputError(fmt::format("rmm-pool: maximum pool size {} is not a multiple of 256 bytes", *maximum_));
    if (maximum_ && options.initial_pool_size > *maximum_)
      throw InputError(fmt::format("rmm-pool: initial pool size {} exceeds the maximum pool size {}",
                                   options.initial_pool_size, *maximum_));
    // RMM's initialize_pool: the whole initial size or nothing, on the
    // default stream's list.
    if (options.initial_pool_size > 0) {
      std::lock_guard lock(mutex_);
      lists_[kDefaultStream].insert(
          try_to_expand(options.initial_pool_size, options.initial_pool_size, kDefaultStream));
    }
  }

  ~Impl() { release(); }

  void* allocate(std::size_t bytes, StreamId stream) {
    if (bytes == 0) return nullptr;
    std::lock_guard lock(mutex_);
    if (bytes > kMaxBytes)
      throw OutOfMemoryError(fmt::format("rmm-pool: Maximum allocation size exceeded ({})", format_bytes(bytes)),
                             bytes);
    const std::size_t size = align_up(bytes);
    const Block b = get_block(size, stream);
    live_[b.ptr] = size;
    bytes_in_use_ += size;
    return reinterpret_cast<void*>(b.ptr);
  }

  bool deallocate(void* ptr, StreamId stream) {
    if (ptr == nullptr) return true;
    std::lock_guard lock(mutex_);
    const auto address = reinterpret_cast<std::uintptr_t>(ptr);
    auto it = live_.find(address);
    if (it == live_.end()) return false;
    const std::size_t size = it->second;
    live_.erase(it);
    bytes_in_use_ -= size;
    // RMM's free_block: a head exactly when it starts an upstream allocation.
    lists_[stream].insert(Block{address, size, upstream_blocks_.contains(address)});
    return true;
  }

  void release() {
    std::lock_guard lock(mutex_);
    for (const auto& [ptr, size] : upstream_blocks_) upstream_.deallocate(reinterpret_cast<void*>(ptr), size);
    upstream_blocks_.clear();
    lists_.clear();
    live_.clear();
    pool_size_ = 0;
    bytes_in_use_ = 0;
  }

  PoolStats stats() const {
    std::lock_guard lock(mutex_);
    PoolStats s;
    s.pool_size = pool_size_;
    s.upstream_blocks = upstream_blocks_.size();
    s.bytes_in_use = bytes_in_use_;
    for (const auto& [stream, list] : lists_) {
      for (const PoolBlock& b : list.blocks()) s.free_bytes += b.size;
      s.free_blocks += list.count();
      s.largest_free_block = std::max(s.largest_free_block, list.largest());
    }
    s.free_lists = lists_.size();
    return s;
  }

  std::size_t pool_size() const {
    std::lock_guard lock(mutex_);
    return pool_size_;
  }

  std::vector<PoolBlock> free_list(StreamId stream) const {
    std::lock_guard lock(mutex_);
    auto it = lists_.find(stream);
    return it == lists_.end() ? std::vector<PoolBlock>{} : it->second.blocks();
  }

  std::vector<PoolBlock> upstream_blocks() const {
    std::lock_guard lock(mutex_);
    std::vector<PoolBlock> out;
    for (const auto& [ptr, size] : upstream_blocks_) out.push_back({ptr, size});
    return out;
  }

 private:
  // stream_ordered_memory_resource::get_block, in RMM's order.
  Block get_block(std::size_t size, StreamId stream) {
    // 1. The stream's own list: no synchronization needed.
    auto own_it = lists_.find(stream);
    if (own_it != lists_.end())
      if (Block b = own_it->second.take_best_fit(size); b.size != 0) return split(b, size, own_it->second);
    FreeList& own = own_it != lists_.end() ? own_it->second : lists_[stream];

    // 2. A block from another stream's list; its remainder stays there.
    for (auto& [other, list] : lists_) {
      if (other == stream) continue;
      if (Block b = list.take_best_fit(size); b.size != 0) return split(b, size, list);
    }

    // 3. Merge other streams' lists into this one, one at a time, until a
    // block fits (free blocks of different streams coalesce only now).
    for (auto it = lists_.begin(); it != lists_.end();) {
      if (it->first == stream) {
        ++it;
        continue;
      }
      own.absorb(it->second);
      it = lists_.erase(it);
      if (Block b = own.take_best_fit(size); b.size != 0) return split(b, size, own);
    }

    // 4. Grow the pool; the rest of the new block joins this stream's list.
    return split(try_to_expand(size_to_grow(size), size, stream), size, own);
  }

  // allocate_from_block: exactly `size`, the rest back to `list`.
  static Block split(const Block& b, std::size_t size, FreeList& list) {
    if (b.size > size) list.insert(Block{b.ptr + size, b.size - size, false});
    return Block{b.ptr, size, b.head};
  }

  // RMM's size_to_grow: halfway to the maximum when there is one, otherwise
  // the current pool size (doubling); 0 when the request cannot fit below
  // the maximum. (RMM subtracts without a check; a pool that ended up just
  // over its maximum through the unaligned half would wrap around there.)
  std::size_t size_to_grow(std::size_t size) const {
    if (maximum_) {
      const std::size_t remaining = pool_size_ >= *maximum_ ? 0 : align_up(*maximum_ - pool_size_);
      const std::size_t aligned = align_up(size);
      return aligned <= remaining ? std::max(aligned, remaining / 2) : 0;
    }
    return std::max(size, pool_size_);
  }

  // RMM's try_to_expand: `try_size`, halved on each upstream failure down
  // to `min_size`.
  Block try_to_expand(std::size_t try_size, std::size_t min_size, StreamId stream) {
    while (try_size >= min_size) {
      try {
        void* p = upstream_.allocate(try_size, stream);
        const auto ptr = reinterpret_cast<std::uintptr_t>(p);
        upstream_blocks_.emplace(ptr, try_size);
        pool_size_ += try_size;
        return Block{ptr, try_size, true};
      } catch (const OutOfMemoryError& e) {
        if (try_size == min_size) throw exceeded(min_size, e.what());
      }
      try_size = std::max(min_size, try_size / 2);
    }
    throw exceeded(min_size,
                   fmt::format("Not enough room to grow, current/max/try size = {}, {}, {}", format_bytes(pool_size_),
                               maximum_ ? format_bytes(*maximum_) : std::string("unlimited"), format_bytes(min_size)));
  }

  static OutOfMemoryError exceeded(std::size_t size, const std::string& reason) {
    return OutOfMemoryError(
        fmt::format("rmm-pool: Maximum pool size exceeded (failed to allocate {}): {}", format_bytes(size), reason),
        size);
  }

  MemoryResource& upstream_;
  const std::optional<std::size_t> maximum_;
  mutable std::mutex mutex_;
  std::size_t pool_size_ = 0;
  std::size_t bytes_in_use_ = 0;
  std::map<std::uintptr_t, std::size_t> upstream_blocks_;  // base -> bytes
  std::map<StreamId, FreeList> lists_;
  std::unordered_map<std::uintptr_t, std::size_t> live_;  // pointer -> rounded size
};

PoolResource::PoolResource(MemoryResource& upstream, PoolResourceOptions options)
    : impl_(std::make_unique<Impl>(upstream, options)) {}

PoolResource::~PoolResource() = default;

void PoolResource::release() { impl_->release(); }
PoolStats PoolResource::stats() const { return impl_->stats(); }
std::size_t PoolResource::pool_size() const { return impl_->pool_size(); }
std::vector<PoolBlock> PoolResource::free_list(StreamId stream) const { return impl_->free_list(stream); }
std::vector<PoolBlock> PoolResource::upstream_blocks() const { return impl_->upstream_blocks(); }

void* PoolResource::do_allocate(std::size_t bytes, StreamId stream) { return impl_->allocate(bytes, stream); }

void PoolResource::do_deallocate(void* ptr, std::size_t, StreamId stream) noexcept {
  if (!impl_->deallocate(ptr, stream)) {
    // RMM asserts in debug builds and corrupts its lists otherwise.
    std::fprintf(stderr, "gpumem: rmm-pool: deallocate(%p): not a live allocation of this pool\n", ptr);
    std::abort();
  }
}

}  // namespace gpumem::alloc
