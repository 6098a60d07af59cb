#pragma once
// The caching allocator's bookkeeping: segments (memory from the upstream),
// the blocks that tile them, and per-stream pools of free blocks.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <set>
#include <vector>

#include "gpumem/alloc/history.h"
#include "gpumem/alloc/memory_resource.h"
#include "gpumem/alloc/stats.h"

namespace gpumem::alloc::detail {

struct Segment;
struct Pool;

// A piece of a segment: allocated, waiting for other streams, or free.
// Blocks of a segment form an address-ordered list through prev/next.
// One per cache line: thread caches write blocks without the allocator's
// lock, and two threads' blocks side by side in the arena would share one
// (measured: 106-155 against 88-92 ns per pair with two threads).
struct alignas(64) Block {
  std::uintptr_t address = 0;
  std::size_t size = 0;
  std::size_t requested = 0;  // caller's bytes while allocated
  Segment* segment = nullptr;
  Block* prev = nullptr;
  Block* next = nullptr;
  Block* bin_prev = nullptr;  // neighbours in a FreeIndex bin
  Block* bin_next = nullptr;
  bool allocated = false;
  // In a thread's magazine (thread_cache.h): free to its caller, but kept
  // out of the pool, so `allocated` stays set and no neighbour merges it.
  bool in_thread_cache = false;
  // is_split() when it went to a thread cache, live or in a magazine; it
  // cannot change while the block is not free.
  bool split_when_cached = false;
  int pending_events = 0;  // events to wait for before it is free
  TagId tag = kNoTag;
  std::uint64_t freed_at = 0;         // allocator clock when it became free (for GC)
  std::vector<StreamId> stream_uses;  // other streams that used it (record_stream)

  bool is_free() const noexcept { return !allocated && pending_events == 0; }
};

// Free blocks ordered by size, then address: lower_bound is best fit, and the
// address tiebreak keeps allocations low in memory.
struct BySizeThenAddress {
  bool operator()(const Block* a, const Block* b) const noexcept {
    return a->size != b->size ? a->size < b->size : a->address < b->address;
  }
};

// Memory from the upstream: one allocation, or (expandable) one reserved
// virtual range of which some granules are mapped.
struct Segment {
  std::uintptr_t base = 0;
  std::size_t size = 0;  // bytes allocated, or the range's virtual size
  Pool* pool = nullptr;
  Block* first = nullptr;
  bool expandable = false;
  std::size_t mapped_bytes = 0;  // expandable: bytes mapped now
  // Expandable: 1 per mapped granule, up to the highest granule ever
  // mapped; past it nothing is. A range spans twice the device, one per
  // stream, and most of it is never touched: 400 streams once took 1 GB.
  std::vector<std::uint8_t> mapped;
  bool granule_mapped(std::size_t i) const noexcept { return i < mapped.size() && mapped[i] != 0; }

  std::size_t reserved_bytes() const noexcept { return expandable ? mapped_bytes : size; }
};

// Block objects are recycled through a free list: the hot path never calls
// the heap for them.
class BlockArena {
 public:
  Block* make() {
    if (spare_.empty()) {
      chunks_.push_back(std::make_unique<Block[]>(kChunk));
      for (std::size_t i = 0; i < kChunk; ++i) spare_.push_back(&chunks_.back()[i]);
    }
    Block* b = spare_.back();
    spare_.pop_back();
    return b;
  }
  void recycle(Block* b) {
    std::vector<StreamId> uses = std::move(b->stream_uses);
    uses.clear();
    *b = Block{};
    b->stream_uses = std::move(uses);
    spare_.push_back(b);
  }

 private:
  static constexpr std::size_t kChunk = 256;
  std::vector<std::unique_ptr<Block[]>> chunks_;
  std::vector<Block*> spare_;
};

}  // namespace gpumem::alloc::detail
