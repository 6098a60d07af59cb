#pragma once
// A fake GPU: it hands out addresses from a virtual range, keeps physical
// accounting against a capacity, maps granules for expandable segments and
// runs streams and events that tests complete by hand. It never touches the
// memory it hands out unless asked to back it with host memory, so it can
// model an 80 GiB device on a laptop. Every allocator feature is tested on it.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpumem/alloc/memory_resource.h"

namespace gpumem::alloc {

struct SimulatedDeviceOptions {
  std::size_t capacity = std::size_t{80} << 30;    // physical bytes
  std::size_t granularity = std::size_t{2} << 20;  // VMM mapping unit
  // Cost of each upstream call (allocate, deallocate, map, unmap), added to
  // simulated_time_ns(). With spin_latency the call also busy-waits that
  // long, so benchmarks feel what cudaMalloc costs.
  std::uint64_t call_latency_ns = 0;
  bool spin_latency = false;
  // Back the memory with host pages (mmap) so tests can write through the
  // pointers. Off: addresses only, nothing is touched.
  bool backed = false;
};

struct SimulatedDeviceCounters {
  std::uint64_t allocate_calls = 0;
  std::uint64_t deallocate_calls = 0;
  std::uint64_t reserve_calls = 0;
  std::uint64_t release_calls = 0;
  std::uint64_t map_calls = 0;
  std::uint64_t unmap_calls = 0;
  std::uint64_t failed_calls = 0;  // requests refused for lack of memory
  std::size_t physical_used = 0;   // bytes allocated or mapped now
  std::size_t physical_peak = 0;
  std::size_t live_allocations = 0;  // allocate() results not yet freed
  std::size_t mapped_bytes = 0;      // of physical_used, through map()
  std::size_t reserved_address_bytes = 0;

  std::uint64_t upstream_calls() const { return allocate_calls + deallocate_calls + map_calls + unmap_calls; }
};

class SimulatedDevice final : public MemoryResource, public VirtualMemory, public EventBackend {
 public:
  explicit SimulatedDevice(SimulatedDeviceOptions options = {});
  ~SimulatedDevice() override;
  SimulatedDevice(const SimulatedDevice&) = delete;
  SimulatedDevice& operator=(const SimulatedDevice&) = delete;

  std::string name() const override { return "simulated-device"; }

  // VirtualMemory
  std::size_t granularity() const noexcept override { return options_.granularity; }
  std::uintptr_t reserve(std::size_t bytes) override;
  void release(std::uintptr_t base, std::size_t bytes) override;
  void map(std::uintptr_t address, std::size_t bytes) override;
  void unmap(std::uintptr_t address, std::size_t bytes) override;
  std::size_t physical_capacity() const noexcept override { return options_.capacity; }

  // EventBackend. A stream's work is modelled as a count of launched kernels;
  // an event waits for the launches queued before it was recorded.
  Event record(StreamId stream) override;
  bool query(Event event) override;
  void synchronize(Event event) override;
  void destroy(Event event) noexcept override;

  // Test controls for streams: queue work, finish it.
  void launch(StreamId stream);
  void complete(StreamId stream);  // everything queued on stream finishes
  void complete_all();
  // Launches queued on `stream` so far, and how many of them have finished
  // (an event's wait, or synchronize(), finishes the ones before it).
  std::uint64_t launched(StreamId stream) const;
  std::uint64_t completed(StreamId stream) const;

  SimulatedDeviceCounters counters() const;
  // counters().physical_used without copying the rest (replay reads it
  // after every allocation).
  std::size_t physical_used() const;
  std::uint64_t simulated_time_ns() const;
  const SimulatedDeviceOptions& options() const noexcept { return options_; }

 protected:
  void* do_allocate(std::size_t bytes, StreamId stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, StreamId stream) noexcept override;

 private:
  struct StreamWork {
    std::uint64_t launched = 0;
    std::uint64_t completed = 0;
  };
  struct EventState {
    StreamId stream;
    std::uint64_t waits_for;  // launches on `stream` that must complete
  };
  struct Reservation {
    std::size_t bytes;
    std::vector<bool> mapped;  // one flag per granule, up to the highest mapped
  };

  void charge_call_locked();
  std::uintptr_t take_address_range_locked(std::size_t bytes, std::size_t alignment);
  void return_address_range_locked(std::uintptr_t base, std::size_t bytes);
  // Throws unless every granule in [first, first + count) is `mapped`.
  void require_granules_locked(const Reservation& r, std::uintptr_t base, std::size_t first, std::size_t count,
                               bool mapped, const char* call, std::uintptr_t address) const;
  Reservation& reservation_of_locked(std::uintptr_t address, std::size_t bytes, const char* call, std::uintptr_t* base);

  const SimulatedDeviceOptions options_;
  mutable std::mutex mutex_;
  SimulatedDeviceCounters counters_;
  std::uint64_t time_ns_ = 0;
  // Address space: a bump pointer plus returned ranges (base -> bytes).
  std::uintptr_t next_address_;
  std::map<std::uintptr_t, std::size_t> free_ranges_;
  std::unordered_map<std::uintptr_t, std::size_t> allocations_;  // allocate() results
  std::map<std::uintptr_t, Reservation> reservations_;
  std::unordered_map<StreamId, StreamWork> streams_;
  std::unordered_map<Event, EventState> events_;
  Event next_event_ = 1;
};

}  // namespace gpumem::alloc
