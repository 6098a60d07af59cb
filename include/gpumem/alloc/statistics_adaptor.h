#pragma once
// An adaptor (the pattern of RMM's): counts the bytes and allocations that
// pass through it to any upstream, with their peaks. It sits over an upstream
// it does not own (which must outlive it) and stacks with the other adaptors
// in any order, e.g. statistics over a budget over the simulated GPU:
//
//   SimulatedDevice device;
//   LimitingAdaptor budget(device, 1 << 30);
//   StatisticsAdaptor stats(budget);
//
// Thread-safe when its upstream is.
#include <cstddef>
#include <mutex>
#include <string>

#include "gpumem/alloc/memory_resource.h"
#include "gpumem/alloc/stats.h"

namespace gpumem::alloc {

// What StatisticsAdaptor counted since it was made (peaks since reset_peak).
struct StatisticsCounters {
  Stat bytes;        // bytes as requested by callers
  Stat allocations;  // allocations handed out
};

class StatisticsAdaptor final : public MemoryResource {
 public:
  explicit StatisticsAdaptor(MemoryResource& upstream) : upstream_(upstream) {}

  std::string name() const override { return "statistics(" + upstream_.name() + ")"; }
  std::size_t alignment() const noexcept override { return upstream_.alignment(); }
  MemoryResource& upstream() const noexcept { return upstream_; }

  StatisticsCounters counters() const;
  // Peaks start again from the current values.
  void reset_peak();

 protected:
  void* do_allocate(std::size_t bytes, StreamId stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, StreamId stream) noexcept override;

 private:
  MemoryResource& upstream_;
  mutable std::mutex mutex_;
  StatisticsCounters counters_;
};

}  // namespace gpumem::alloc
