// LimitingAdaptor: a byte budget over any resource.
#include <fmt/format.h>

#include "gpumem/alloc/limiting_adaptor.h"
#include "gpumem/common/units.h"

namespace gpumem::alloc {

// SIZE_MAX stands for "cannot be rounded", which no budget admits.
std::size_t LimitingAdaptor::charged_size(std::size_t bytes) const noexcept {
  const std::size_t align = upstream_.alignment() == 0 ? 1 : upstream_.alignment();
  const std::size_t rest = bytes % align;
  if (rest == 0) return bytes;
  if (bytes > SIZE_MAX - (align - rest)) return SIZE_MAX;
  return bytes + (align - rest);
}

void* LimitingAdaptor::do_allocate(std::size_t bytes, StreamId stream) {
  if (bytes == 0) return upstream_.allocate(bytes, stream);
  const std::size_t charge = charged_size(bytes);
  // Take the bytes from the budget before calling upstream, so concurrent
  // requests can never overshoot it together.
  std::size_t in_use = used_.load(std::memory_order_relaxed);
  do {
    if (charge > limit_ || in_use > limit_ - charge)
      throw OutOfMemoryError(fmt::format("{}: byte budget of {} exceeded: {} in use, {} requested", name(),
                                         format_bytes(limit_), format_bytes(in_use), format_bytes(bytes)),
                             bytes);
  } while (!used_.compare_exchange_weak(in_use, in_use + charge, std::memory_order_relaxed));
  try {
    return upstream_.allocate(bytes, stream);
  } catch (...) {
    used_.fetch_sub(charge, std::memory_order_relaxed);
    throw;
  }
}

void LimitingAdaptor::do_deallocate(void* ptr, std::size_t bytes, StreamId stream) noexcept {
  upstream_.deallocate(ptr, bytes, stream);
  if (ptr != nullptr) used_.fetch_sub(charged_size(bytes), std::memory_order_relaxed);
}

}  // namespace gpumem::alloc
