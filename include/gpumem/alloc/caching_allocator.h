#pragma once
// The caching device allocator.
//
// Device allocation (cudaMalloc) is slow and synchronizes, so memory freed by
// the caller is kept in pools and handed out again. Requests are rounded,
// split out of cached blocks found by best fit, and coalesced with their
// neighbours when freed. Small and large requests use separate pools, and
// every stream has its own, so a block is reused only in its stream's order;
// a free issued on another stream waits for an event recorded there.
//
// With expandable segments each pool grows a single virtual range by mapping
// granules, so free space can be unmapped and the range never breaks into
// segments too small to use. Running out of memory first gives cached memory
// back and retries, then throws an OutOfMemoryError that explains the state.
//
// Every method is thread-safe. Once a second thread calls, each thread
// keeps a few blocks it freed in a cache of its own and reuses them without
// the allocator's lock; statistics stay exact (docs/allocator.md, "Threads").
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gpumem/alloc/config.h"
#include "gpumem/alloc/history.h"
#include "gpumem/alloc/memory_resource.h"
#include "gpumem/alloc/snapshot.h"
#include "gpumem/alloc/stats.h"

namespace gpumem::alloc {

// Where the caching allocator gets device memory from. `memory` serves
// ordinary segments; `vmm` is needed for expandable segments; `events` for
// frees on another stream (without it such frees complete at once, which is
// only right when the streams are synchronized by other means).
struct Upstream {
  MemoryResource* memory = nullptr;
  VirtualMemory* vmm = nullptr;
  EventBackend* events = nullptr;
  // Capacity for messages and limits; 0 takes vmm's physical capacity.
  std::size_t capacity = 0;
};

class SimulatedDevice;
// The simulated device as memory, virtual memory and events at once.
Upstream simulated_upstream(SimulatedDevice& device);

// The cache's free space: bytes in free blocks (for expandable segments,
// only mapped granules count) and the longest stretch of them, i.e. what
// could be handed out without a device call. Fragmentation is
// 1 - largest_block / free_bytes, as out-of-memory messages state it.
struct FreeSpace {
  std::size_t free_bytes = 0;
  std::size_t largest_block = 0;
};

// Result of CachingAllocator::free(): the C API maps it to error codes.
enum class FreeStatus : std::uint8_t { kOk, kUnknownPointer };

class CachingAllocator final : public MemoryResource {
 public:
  // Throws InputError when the config fails validate() or asks for what the
  // upstream cannot do (expandable segments without VirtualMemory).
  CachingAllocator(Upstream upstream, AllocatorConfig config = AllocatorConfig::gpumem_defaults());
  ~CachingAllocator() override;  // gives everything cached back to the upstream
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  std::string name() const override { return "caching-allocator"; }

  // allocate() with a tag naming the allocation in snapshots, history and
  // out-of-memory messages.
  void* allocate_tagged(std::size_t bytes, StreamId stream, TagId tag);
  TagId intern_tag(std::string_view name) { return tags_.intern(name); }
  const TagTable& tags() const noexcept { return tags_; }

  // Frees `ptr`; `stream` other than the allocation's defers the reuse until
  // an event recorded on `stream` completes. Unknown pointers are refused.
  FreeStatus free(void* ptr, StreamId stream);
  // Marks `ptr` as used by `stream` too (as torch's Tensor.record_stream):
  // when freed, it is reused only after that stream's queued work finishes.
  FreeStatus record_stream(void* ptr, StreamId stream);

  // Waits for pending frees, then gives every fully free segment (for
  // expandable segments: every free granule) back to the upstream.
  void empty_cache();

  AllocatorStats stats() const;
  // stats() and the free space, under one lock so they agree. It walks every
  // block: for monitoring every few milliseconds (StatsPublisher), not for
  // the hot path.
  AllocatorStats stats(FreeSpace& free_space) const;
  void reset_peak_stats();
  void reset_accumulated_stats();
  Snapshot snapshot() const;
  // A table like torch.cuda.memory_summary(): rows per statistic, columns
  // current / peak / allocated / freed, in binary units.
  std::string memory_summary() const;

  // History (config.history_capacity > 0; otherwise empty).
  std::vector<HistoryEvent> history() const;
  void write_history(std::ostream& out) const;

  const AllocatorConfig& config() const noexcept { return config_; }
  std::size_t capacity() const noexcept;

 protected:
  void* do_allocate(std::size_t bytes, StreamId stream) override { return allocate_tagged(bytes, stream, kNoTag); }
  void do_deallocate(void* ptr, std::size_t bytes, StreamId stream) noexcept override;

 private:
  class Impl;
  TagTable tags_;
  AllocatorConfig config_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpumem::alloc
