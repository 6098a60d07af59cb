// Small requests' slots in device chunks (see small_slots.h).
#include "alloc/small_slots.h"

#include <iterator>

namespace gpumem::alloc::detail {

static_assert(SmallSlots::kChunk / SmallSlots::kSlot == 32, "one 32-bit mask per chunk");

SmallSlots::~SmallSlots() {
  for (const auto& [base, used] : chunks_) device_->deallocate(reinterpret_cast<void*>(base), kChunk, stream_);
}

void* SmallSlots::allocate(std::size_t bytes) {
  const std::size_t slots = (bytes + kSlot - 1) / kSlot;
  const std::size_t per_chunk = kChunk / kSlot;
  for (auto& [base, used] : chunks_) {
    if (used == ~std::uint32_t{0}) continue;  // full
    for (std::size_t first = 0; first + slots <= per_chunk; ++first) {
      if ((used & mask(first, slots)) == 0) {
        used |= mask(first, slots);
        return reinterpret_cast<void*>(base + first * kSlot);
      }
    }
  }
  void* chunk = device_->allocate(kChunk, stream_);
  try {
    chunks_.emplace(reinterpret_cast<std::uintptr_t>(chunk), mask(0, slots));
  } catch (...) {
    device_->deallocate(chunk, kChunk, stream_);
    throw;
  }
  return chunk;
}

void SmallSlots::free(void* p, std::size_t bytes) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  auto it = std::prev(chunks_.upper_bound(address));
  it->second &= ~mask((address - it->first) / kSlot, (bytes + kSlot - 1) / kSlot);
  if (it->second == 0) {
    device_->deallocate(reinterpret_cast<void*>(it->first), kChunk, stream_);
    chunks_.erase(it);
  }
}

}  // namespace gpumem::alloc::detail
