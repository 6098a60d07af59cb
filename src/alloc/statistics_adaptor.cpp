// StatisticsAdaptor: byte and allocation counts over any resource.
#include <mutex>

#include "gpumem/alloc/statistics_adaptor.h"

namespace gpumem::alloc {

StatisticsCounters StatisticsAdaptor::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

void StatisticsAdaptor::reset_peak() {
  std::lock_guard lock(mutex_);
  counters_.bytes.reset_peak();
  counters_.allocations.reset_peak();
}

void* StatisticsAdaptor::do_allocate(std::size_t bytes, StreamId stream) {
  // The upstream call stays outside the lock: it may be slow (cudaMalloc)
  // and the counters only need to see its outcome.
  void* ptr = upstream_.allocate(bytes, stream);
  if (ptr == nullptr) return ptr;  // a 0-byte request allocates nothing
  std::lock_guard lock(mutex_);
  counters_.bytes.increase(static_cast<std::int64_t>(bytes));
  counters_.allocations.increase(1);
  return ptr;
}

void StatisticsAdaptor::do_deallocate(void* ptr, std::size_t bytes, StreamId stream) noexcept {
  if (ptr != nullptr) {
    // Counted before the upstream sees it, so that an allocation reusing
    // the memory on another thread never makes the counts overshoot.
    std::lock_guard lock(mutex_);
    counters_.bytes.decrease(static_cast<std::int64_t>(bytes));
    counters_.allocations.decrease(1);
  }
  upstream_.deallocate(ptr, bytes, stream);
}

}  // namespace gpumem::alloc
