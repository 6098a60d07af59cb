// CachingAllocator: the public class over its Impl
// (caching_allocator_impl.h, which lays out the files that implement it).
#include "gpumem/alloc/caching_allocator.h"

#include <cstdio>
#include <cstdlib>
#include <ostream>

#include "alloc/caching_allocator_impl.h"
#include "gpumem/alloc/simulated_device.h"

namespace gpumem::alloc {

Upstream simulated_upstream(SimulatedDevice& device) {
  return Upstream{&device, &device, &device, device.physical_capacity()};
}

// ---- the public class -------------------------------------------------------

namespace {

// Before anything is built from it: the history ring alone is sized by it.
const AllocatorConfig& validated(const AllocatorConfig& config) {
  validate(config);
  return config;
}

}  // namespace

CachingAllocator::CachingAllocator(Upstream upstream, AllocatorConfig config)
    : config_(validated(config)), impl_(std::make_unique<Impl>(upstream, config_, tags_)) {}

CachingAllocator::~CachingAllocator() = default;

void* CachingAllocator::allocate_tagged(std::size_t bytes, StreamId stream, TagId tag) {
  return impl_->allocate(bytes, stream, tag);
}

FreeStatus CachingAllocator::free(void* ptr, StreamId stream) { return impl_->free(ptr, stream); }

FreeStatus CachingAllocator::record_stream(void* ptr, StreamId stream) { return impl_->record_stream(ptr, stream); }

void CachingAllocator::do_deallocate(void* ptr, std::size_t, StreamId stream) noexcept {
  if (impl_->free(ptr, stream) == FreeStatus::kUnknownPointer) {
    // As glibc does for free(): a bad pointer means memory is corrupt.
    std::fprintf(stderr, "gpumem: deallocate(%p): not a live allocation of this allocator\n", ptr);
    std::abort();
  }
}

void CachingAllocator::empty_cache() { impl_->empty_cache(); }
AllocatorStats CachingAllocator::stats() const { return impl_->stats(); }
AllocatorStats CachingAllocator::stats(FreeSpace& free_space) const { return impl_->stats(free_space); }
void CachingAllocator::reset_peak_stats() { impl_->reset_peak_stats(); }
void CachingAllocator::reset_accumulated_stats() { impl_->reset_accumulated_stats(); }
Snapshot CachingAllocator::snapshot() const { return impl_->snapshot(); }
std::string CachingAllocator::memory_summary() const { return format_memory_summary(impl_->stats()); }
std::vector<HistoryEvent> CachingAllocator::history() const { return impl_->history(); }
std::size_t CachingAllocator::capacity() const noexcept { return impl_->capacity(); }

void CachingAllocator::write_history(std::ostream& out) const {
  write_history_jsonl(out, impl_->history(), impl_->history_dropped(), tags_);
}

}  // namespace gpumem::alloc
