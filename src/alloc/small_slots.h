#pragma once
// Requests under 512 bytes that planned mode gives device memory of their
// own (a recorded iteration's, and what a plan expects to outlive its
// iteration): 128-byte slots in 4 KiB chunks taken from the device, instead
// of a device allocation each. A device allocation is 256-byte aligned on
// CUDA and rounded to 512 by the cache; training steps make hundreds of
// requests of 4 to 256 bytes (step counters, losses, norms), and at that
// rounding a small model's recorded iteration reserves 6% more than it
// allocates. 128 bytes is a GPU cache line, and more than the 16 any vector
// load needs.
//
// First fit over the chunks in address order; a chunk goes back to the
// device when its last slot is freed. Not thread-safe: the planned
// allocator's lock guards it.
#include <cstddef>
#include <cstdint>
#include <map>

#include "gpumem/alloc/memory_resource.h"

namespace gpumem::alloc::detail {

class SmallSlots {
 public:
  static constexpr std::size_t kSlot = 128;
  static constexpr std::size_t kChunk = 4096;
  static constexpr std::size_t kLargest = 511;  // requests up to this many bytes take slots

  SmallSlots(MemoryResource* device, StreamId stream) : device_(device), stream_(stream) {}
  ~SmallSlots();
  SmallSlots(const SmallSlots&) = delete;
  SmallSlots& operator=(const SmallSlots&) = delete;

  // Slots for `bytes` (1 to kLargest); throws OutOfMemoryError when the
  // device has no room for a new chunk.
  void* allocate(std::size_t bytes);
  // Frees what allocate(bytes) returned.
  void free(void* p, std::size_t bytes);
  std::size_t device_bytes() const { return chunks_.size() * kChunk; }

 private:
  static std::uint32_t mask(std::size_t first, std::size_t slots) {
    return static_cast<std::uint32_t>(((std::uint64_t{1} << slots) - 1) << first);
  }
  MemoryResource* device_;
  StreamId stream_;
  std::map<std::uintptr_t, std::uint32_t> chunks_;  // base address -> one bit per slot in use
};

}  // namespace gpumem::alloc::detail
