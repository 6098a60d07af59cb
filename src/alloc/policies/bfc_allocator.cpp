// TensorFlow's BFC allocator as a replay policy. The behaviour follows
// tsl::BFCAllocator (third_party/xla/xla/tsl/framework/bfc_allocator.cc);
// the data structures are gpumem's own: chunks in a vector linked by index
// within their region, a set per bin ordered by (size, address), and a hash
// map from live pointers to chunks. (TF maps every 256-byte slot of a region
// to its chunk; replay regions can be terabytes, so that table is avoided.)
#include "gpumem/alloc/policies/bfc_allocator.h"
#include "gpumem/alloc/memory_resource.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/common/units.h"

namespace gpumem::alloc {
namespace {

constexpr std::size_t kMinAllocationBits = 8;
constexpr std::size_t kMinAllocationSize = std::size_t{1} << kMinAllocationBits;  // 256
constexpr int kNumBins = 21;  // the last bin starts at 256 << 20 = 256 MiB
constexpr std::size_t kMaxInternalFragmentation = std::size_t{128} << 20;

using Handle = std::size_t;
constexpr Handle kNoChunk = std::numeric_limits<Handle>::max();

// TF's BinNumForSize: log2 of the size in 256-byte units, capped.
int bin_for(std::size_t bytes) {
  const std::size_t units = std::max(bytes, kMinAllocationSize) >> kMinAllocationBits;
  return std::min(kNumBins - 1, static_cast<int>(std::bit_width(units)) - 1);
}

}  // namespace

std::size_t BfcAllocator::rounded_bytes(std::size_t bytes) noexcept {
  return (bytes + kMinAllocationSize - 1) / kMinAllocationSize * kMinAllocationSize;
}

class BfcAllocator::Impl {
 public:
  Impl(MemoryResource& upstream, const BfcOptions& options) : upstream_(upstream) {
    std::size_t limit = options.memory_limit;
    if (limit == 0) {
      const auto* vmm = dynamic_cast<const VirtualMemory*>(&upstream);
      if (vmm == nullptr || vmm->physical_capacity() == 0)
        throw InputError("bfc: memory_limit is 0 and the upstream '" + upstream.name() +
                         "' does not say its capacity; give a memory limit");
      limit = vmm->physical_capacity();
    }
    memory_limit_ = std::min(limit, kMaxBytes);
    // As TF's constructor: the first region is small with allow_growth, the
    // whole limit otherwise (taken by the first allocation, not here).
    curr_region_bytes_ = BfcAllocator::rounded_bytes(
        options.allow_growth ? std::min(memory_limit_, std::max(options.initial_region_bytes, kMinAllocationSize))
                             : memory_limit_);
    max_internal_fragmentation_ =
        options.fragmentation_fraction > 0
            ? static_cast<std::size_t>(options.fragmentation_fraction * static_cast<double>(memory_limit_))
            : kMaxInternalFragmentation;
  }

  ~Impl() {
    for (const Region& r : regions_) upstream_.deallocate(reinterpret_cast<void*>(r.base), r.size);
  }

  void* allocate(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    std::lock_guard lock(mutex_);
    if (bytes > kMaxBytes) throw out_of_memory(bytes, kMaxBytes);
    const std::size_t rounded = BfcAllocator::rounded_bytes(bytes);
    if (void* p = find_chunk(rounded)) return p;
    if (extend(rounded))
      if (void* p = find_chunk(rounded)) return p;
    throw out_of_memory(bytes, rounded);
  }

  bool deallocate(void* ptr) {
    if (ptr == nullptr) return true;
    std::lock_guard lock(mutex_);
    auto it = live_.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (it == live_.end()) return false;
    const Handle h = it->second;
    live_.erase(it);
    Chunk& c = chunks_[h];
    c.in_use = false;
    bytes_in_use_ -= c.size;
    insert_free(coalesce(h));
    return true;
  }

  BfcStats stats() const {
    std::lock_guard lock(mutex_);
    BfcStats s;
    s.bytes_in_use = bytes_in_use_;
    s.peak_bytes_in_use = peak_bytes_in_use_;
    s.pool_bytes = pool_bytes_;
    s.peak_pool_bytes = pool_bytes_;  // regions are never given back
    s.bytes_limit = memory_limit_;
    s.num_allocs = num_allocs_;
    s.largest_alloc_size = largest_alloc_size_;
    for (int b = kNumBins - 1; b >= 0; --b)
      if (!bins_[b].empty()) {
        s.largest_free_chunk = std::prev(bins_[b].end())->size;
        break;
      }
    s.regions = regions_.size();
    return s;
  }

  std::vector<std::size_t> region_sizes() const {
    std::lock_guard lock(mutex_);
    std::vector<std::size_t> sizes;
    for (const Region& r : regions_) sizes.push_back(r.size);
    return sizes;
  }

  std::vector<BfcChunk> chunks() const {
    std::lock_guard lock(mutex_);
    std::vector<BfcChunk> out;
    for (const Region& r : regions_)
      for (Handle h = r.first; h != kNoChunk; h = chunks_[h].next)
        out.push_back({chunks_[h].ptr, chunks_[h].size, chunks_[h].in_use});
    std::sort(out.begin(), out.end(), [](const BfcChunk& a, const BfcChunk& b) { return a.address < b.address; });
    return out;
  }

 private:
  // A piece of a region, free or handed out. prev/next are the chunks
  // physically before and after it in the same region.
  struct Chunk {
    std::uintptr_t ptr = 0;
    std::size_t size = 0;
    bool in_use = false;
    int bin = -1;  // the bin holding it while free
    Handle prev = kNoChunk;
    Handle next = kNoChunk;
  };
  // One upstream allocation. Its first chunk never changes: merging always
  // folds the later chunk into the earlier one.
  struct Region {
    std::uintptr_t base;
    std::size_t size;
    Handle first;
  };
  struct BinEntry {
    std::size_t size;
    std::uintptr_t ptr;
    Handle handle;
    // TF's ChunkComparator: size, then address.
    bool operator<(const BinEntry& o) const { return size != o.size ? size < o.size : ptr < o.ptr; }
  };

  Handle new_chunk() {
    if (!unused_.empty()) {
      Handle h = unused_.back();
      unused_.pop_back();
      chunks_[h] = Chunk{};
      return h;
    }
    chunks_.emplace_back();
    return chunks_.size() - 1;
  }

  void insert_free(Handle h) {
    Chunk& c = chunks_[h];
    c.bin = bin_for(c.size);
    bins_[c.bin].insert({c.size, c.ptr, h});
  }

  void remove_free(Handle h) {
    Chunk& c = chunks_[h];
    bins_[c.bin].erase({c.size, c.ptr, h});
    c.bin = -1;
  }

  // TF's FindChunkPtr: from the request's bin upwards, the first chunk that
  // fits in (size, address) order. Within a bin that is lower_bound; every
  // chunk of a higher bin fits.
  void* find_chunk(std::size_t rounded) {
    for (int b = bin_for(rounded); b < kNumBins; ++b) {
      auto it = bins_[b].lower_bound({rounded, 0, 0});
      if (it == bins_[b].end()) continue;
      const Handle h = it->handle;
      bins_[b].erase(it);
      chunks_[h].bin = -1;
      // Split only into "two reasonably large pieces", or when keeping the
      // whole chunk would waste at least the fragmentation cap.
      if (chunks_[h].size >= rounded * 2 || chunks_[h].size - rounded >= max_internal_fragmentation_) split(h, rounded);
      Chunk& c = chunks_[h];
      c.in_use = true;
      live_[c.ptr] = h;
      ++num_allocs_;
      bytes_in_use_ += c.size;
      peak_bytes_in_use_ = std::max(peak_bytes_in_use_, bytes_in_use_);
      largest_alloc_size_ = std::max(largest_alloc_size_, c.size);
      return reinterpret_cast<void*>(c.ptr);
    }
    return nullptr;
  }

  // Cuts `h` to `bytes`; the rest becomes a free chunk right after it.
  void split(Handle h, std::size_t bytes) {
    const Handle rest = new_chunk();  // may reallocate chunks_: take references after
    Chunk& c = chunks_[h];
    Chunk& r = chunks_[rest];
    r.ptr = c.ptr + bytes;
    r.size = c.size - bytes;
    c.size = bytes;
    r.prev = h;
    r.next = c.next;
    if (c.next != kNoChunk) chunks_[c.next].prev = rest;
    c.next = rest;
    insert_free(rest);
  }

  // Folds free chunk `second` (right after `first`) into `first`.
  void merge(Handle first, Handle second) {
    Chunk& a = chunks_[first];
    Chunk& b = chunks_[second];
    a.size += b.size;
    a.next = b.next;
    if (b.next != kNoChunk) chunks_[b.next].prev = first;
    unused_.push_back(second);
  }

  // TF's TryToCoalesce: the next chunk into this one, then this one into the
  // previous. Returns the chunk that remains (not yet in a bin).
  Handle coalesce(Handle h) {
    const Handle next = chunks_[h].next;
    if (next != kNoChunk && !chunks_[next].in_use) {
      remove_free(next);
      merge(h, next);
    }
    const Handle prev = chunks_[h].prev;
    if (prev != kNoChunk && !chunks_[prev].in_use) {
      remove_free(prev);
      merge(prev, h);
      return prev;
    }
    return h;
  }

  // TF's Extend(): a new region large enough for `rounded`, within the
  // memory limit. Returns false when neither the limit nor the upstream
  // allows one.
  bool extend(std::size_t rounded) {
    const std::size_t available = (memory_limit_ - pool_bytes_) / kMinAllocationSize * kMinAllocationSize;
    if (rounded > available) return false;
    // A request larger than the region size doubles it until it fits; that
    // counts as this region's doubling.
    bool increased = false;
    while (rounded > curr_region_bytes_) {
      curr_region_bytes_ *= 2;
      increased = true;
    }
    std::size_t bytes = std::min(curr_region_bytes_, available);
    void* base = try_upstream(bytes);
    // On failure TF backs off by kBackpedalFactor = 0.9 (a float, so the
    // product is computed in float) down to the request. TF repeats while
    // the size is still at least the request; below about 2.5 KiB, 0.9x
    // rounds back up to the same size, which in TF would retry forever, so
    // this stops once backing off no longer shrinks the size.
    while (base == nullptr) {
      const std::size_t smaller =
          BfcAllocator::rounded_bytes(static_cast<std::size_t>(static_cast<float>(bytes) * 0.9f));
      if (smaller < rounded || smaller >= bytes) return false;
      bytes = smaller;
      base = try_upstream(bytes);
    }
    // The next region is twice as large, unless this one already doubled.
    // (Saturating: the limit caps every region anyway.)
    if (!increased && curr_region_bytes_ < kMaxBytes) curr_region_bytes_ *= 2;
    pool_bytes_ += bytes;

    const Handle h = new_chunk();
    chunks_[h].ptr = reinterpret_cast<std::uintptr_t>(base);
    chunks_[h].size = bytes;
    regions_.push_back({chunks_[h].ptr, bytes, h});
    insert_free(h);
    return true;
  }

  void* try_upstream(std::size_t bytes) {
    try {
      return upstream_.allocate(bytes);
    } catch (const OutOfMemoryError& e) {
      last_upstream_error_ = e.what();
      return nullptr;
    }
  }

  OutOfMemoryError out_of_memory(std::size_t bytes, std::size_t rounded) const {
    std::size_t largest_free = 0;
    for (const auto& bin : bins_)
      if (!bin.empty()) largest_free = std::max(largest_free, std::prev(bin.end())->size);
    std::string message = fmt::format(
        "Allocator (bfc) ran out of memory trying to allocate {} (rounded to {}); in use {}, regions {} of "
        "limit {}, largest free chunk {}",
        format_bytes(bytes), rounded, format_bytes(bytes_in_use_), format_bytes(pool_bytes_),
        format_bytes(memory_limit_), format_bytes(largest_free));
    if (!last_upstream_error_.empty()) message += "; last upstream failure: " + last_upstream_error_;
    return OutOfMemoryError(message, bytes);
  }

  MemoryResource& upstream_;
  std::size_t memory_limit_ = 0;
  std::size_t max_internal_fragmentation_ = 0;

  mutable std::mutex mutex_;
  std::size_t curr_region_bytes_ = 0;
  std::vector<Chunk> chunks_;
  std::vector<Handle> unused_;  // recycled chunk slots
  std::array<std::set<BinEntry>, kNumBins> bins_;
  std::unordered_map<std::uintptr_t, Handle> live_;
  std::vector<Region> regions_;
  std::string last_upstream_error_;

  std::size_t bytes_in_use_ = 0;
  std::size_t peak_bytes_in_use_ = 0;
  std::size_t pool_bytes_ = 0;
  std::uint64_t num_allocs_ = 0;
  std::size_t largest_alloc_size_ = 0;
};

BfcAllocator::BfcAllocator(MemoryResource& upstream, BfcOptions options)
    : impl_(std::make_unique<Impl>(upstream, options)) {}

BfcAllocator::~BfcAllocator() = default;

BfcStats BfcAllocator::stats() const { return impl_->stats(); }
std::vector<std::size_t> BfcAllocator::region_sizes() const { return impl_->region_sizes(); }
std::vector<BfcChunk> BfcAllocator::chunks() const { return impl_->chunks(); }

void* BfcAllocator::do_allocate(std::size_t bytes, StreamId) { return impl_->allocate(bytes); }

void BfcAllocator::do_deallocate(void* ptr, std::size_t, StreamId) noexcept {
  if (!impl_->deallocate(ptr)) {
    // TF CHECK-fails here too: a bad pointer means memory is corrupt.
    std::fprintf(stderr, "gpumem: bfc: deallocate(%p): not a live allocation of this allocator\n", ptr);
    std::abort();
  }
}

}  // namespace gpumem::alloc
