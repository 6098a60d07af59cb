// The simulated GPU: address-space bookkeeping, physical accounting against a
// capacity, granule mapping, and streams whose work tests complete by hand.
#include "gpumem/alloc/simulated_device.h"
#include "gpumem/alloc/memory_resource.h"

#include <sys/mman.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iterator>

#include <fmt/format.h>

#include "gpumem/common/units.h"

namespace gpumem::alloc {
namespace {

// Simulated addresses start at 1 TiB: far from null, obviously not host heap.
constexpr std::uintptr_t kAddressBase = std::uintptr_t{1} << 40;
constexpr std::size_t kHostPage = 4096;

void spin_for(std::uint64_t ns) {
  auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
  while (std::chrono::steady_clock::now() < until) {
  }
}

[[noreturn]] void fatal(const std::string& message) {
  std::fprintf(stderr, "gpumem simulated device: %s\n", message.c_str());
  std::abort();
}

}  // namespace

SimulatedDevice::SimulatedDevice(SimulatedDeviceOptions options) : options_(options), next_address_(kAddressBase) {
  if (options_.granularity == 0 || (options_.granularity & (options_.granularity - 1)) != 0 ||
      options_.granularity < kHostPage)
    throw DeviceError(
        fmt::format("simulated device: granularity {} is not a power of two of at least 4 KiB", options_.granularity));
}

SimulatedDevice::~SimulatedDevice() {
  if (!options_.backed) return;
  for (auto& [address, bytes] : allocations_) munmap(reinterpret_cast<void*>(address), round_up(bytes, kHostPage));
  for (auto& [base, r] : reservations_) munmap(reinterpret_cast<void*>(base), r.bytes);
}

void SimulatedDevice::charge_call_locked() {
  time_ns_ += options_.call_latency_ns;
  if (options_.spin_latency && options_.call_latency_ns) spin_for(options_.call_latency_ns);
}

std::uintptr_t SimulatedDevice::take_address_range_locked(std::size_t bytes, std::size_t alignment) {
  // First fit among returned ranges, else the bump pointer.
  for (auto it = free_ranges_.begin(); it != free_ranges_.end(); ++it) {
    std::uintptr_t start = round_up(it->first, alignment);
    std::uintptr_t end = it->first + it->second;
    if (start + bytes > end) continue;
    std::uintptr_t range_base = it->first;
    free_ranges_.erase(it);
    if (start > range_base) free_ranges_[range_base] = start - range_base;
    if (start + bytes < end) free_ranges_[start + bytes] = end - (start + bytes);
    return start;
  }
  std::uintptr_t start = round_up(next_address_, alignment);
  if (start > next_address_) free_ranges_[next_address_] = start - next_address_;
  next_address_ = start + bytes;
  return start;
}

void SimulatedDevice::return_address_range_locked(std::uintptr_t base, std::size_t bytes) {
  auto next = free_ranges_.lower_bound(base);
  if (next != free_ranges_.end() && next->first == base + bytes) {
    bytes += next->second;
    next = free_ranges_.erase(next);
  }
  if (next != free_ranges_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == base) {
      prev->second += bytes;
      return;
    }
  }
  free_ranges_[base] = bytes;
}

void* SimulatedDevice::do_allocate(std::size_t bytes, StreamId) {
  if (bytes == 0) return nullptr;
  std::lock_guard lock(mutex_);
  charge_call_locked();
  ++counters_.allocate_calls;
  std::size_t charged = round_up(bytes, kDeviceAlignment);
  if (charged < bytes || charged > options_.capacity - counters_.physical_used) {
    ++counters_.failed_calls;
    throw OutOfMemoryError(fmt::format("simulated device: cannot allocate {}: {} of {} in use", format_bytes(bytes),
                                       format_bytes(counters_.physical_used), format_bytes(options_.capacity)),
                           bytes);
  }
  std::uintptr_t address;
  if (options_.backed) {
    void* p = mmap(nullptr, round_up(bytes, kHostPage), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      ++counters_.failed_calls;
      throw OutOfMemoryError(fmt::format("simulated device: host backing of {} failed", format_bytes(bytes)), bytes);
    }
    address = reinterpret_cast<std::uintptr_t>(p);
  } else {
    // Like cudaMalloc: large allocations start on a 2 MiB boundary.
    address = take_address_range_locked(charged, bytes >= (std::size_t{1} << 20) ? std::size_t{2} << 20 : 512);
  }
  allocations_[address] = bytes;
  counters_.physical_used += charged;
  counters_.physical_peak = std::max(counters_.physical_peak, counters_.physical_used);
  ++counters_.live_allocations;
  return reinterpret_cast<void*>(address);
}

void SimulatedDevice::do_deallocate(void* ptr, std::size_t, StreamId) noexcept {
  if (ptr == nullptr) return;
  std::lock_guard lock(mutex_);
  charge_call_locked();
  ++counters_.deallocate_calls;
  auto address = reinterpret_cast<std::uintptr_t>(ptr);
  auto it = allocations_.find(address);
  if (it == allocations_.end()) fatal(fmt::format("deallocate({:#x}): not an allocation of this device", address));
  std::size_t bytes = it->second;
  allocations_.erase(it);
  counters_.physical_used -= round_up(bytes, kDeviceAlignment);
  --counters_.live_allocations;
  if (options_.backed)
    munmap(ptr, round_up(bytes, kHostPage));
  else
    return_address_range_locked(address, round_up(bytes, kDeviceAlignment));
}

std::uintptr_t SimulatedDevice::reserve(std::size_t bytes) {
  const std::size_t g = options_.granularity;
  if (bytes == 0 || bytes % g != 0)
    throw DeviceError(fmt::format("simulated device: reserve({}): not a positive multiple of the granularity", bytes));
  std::lock_guard lock(mutex_);
  ++counters_.reserve_calls;
  std::uintptr_t base;
  if (options_.backed) {
    // Over-reserve by one granule to align the range, then trim.
    void* p = mmap(nullptr, bytes + g, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
      throw OutOfMemoryError(
          fmt::format("simulated device: cannot reserve {} of host address space", format_bytes(bytes)), bytes);
    auto raw = reinterpret_cast<std::uintptr_t>(p);
    base = round_up(raw, g);
    if (base > raw) munmap(p, base - raw);
    if (raw + bytes + g > base + bytes) munmap(reinterpret_cast<void*>(base + bytes), raw + g - base);
  } else {
    base = take_address_range_locked(bytes, g);
  }
  // Granule flags grow as granules are mapped: a range per stream spans
  // twice the device and most of it is never mapped.
  reservations_[base] = Reservation{bytes, {}};
  counters_.reserved_address_bytes += bytes;
  return base;
}

SimulatedDevice::Reservation& SimulatedDevice::reservation_of_locked(std::uintptr_t address, std::size_t bytes,
                                                                     const char* call, std::uintptr_t* base) {
  const std::size_t g = options_.granularity;
  if (bytes == 0 || bytes % g != 0 || address % g != 0)
    throw DeviceError(fmt::format("simulated device: {}({:#x}, {}): address and size must be multiples of {}", call,
                                  address, bytes, g));
  auto it = reservations_.upper_bound(address);
  if (it == reservations_.begin() || address + bytes > std::prev(it)->first + std::prev(it)->second.bytes)
    throw DeviceError(
        fmt::format("simulated device: {}({:#x}, {}): not inside a reserved range", call, address, bytes));
  --it;
  *base = it->first;
  return it->second;
}

void SimulatedDevice::release(std::uintptr_t base, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  auto it = reservations_.find(base);
  if (it == reservations_.end() || it->second.bytes != bytes)
    throw DeviceError(fmt::format("simulated device: release({:#x}, {}): not a reserved range", base, bytes));
  for (bool mapped : it->second.mapped)
    if (mapped) throw DeviceError(fmt::format("simulated device: release({:#x}): part of it is still mapped", base));
  ++counters_.release_calls;
  counters_.reserved_address_bytes -= bytes;
  reservations_.erase(it);
  if (options_.backed)
    munmap(reinterpret_cast<void*>(base), bytes);
  else
    return_address_range_locked(base, bytes);
}

void SimulatedDevice::require_granules_locked(const Reservation& r, std::uintptr_t base, std::size_t first,
                                              std::size_t count, bool mapped, const char* call,
                                              std::uintptr_t address) const {
  for (std::size_t i = first; i < first + count; ++i)
    if ((i < r.mapped.size() && r.mapped[i]) != mapped)
      throw DeviceError(fmt::format("simulated device: {}({:#x}): granule {:#x} is {}", call, address,
                                    base + i * options_.granularity, mapped ? "not mapped" : "already mapped"));
}

void SimulatedDevice::map(std::uintptr_t address, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  std::uintptr_t base = 0;
  Reservation& r = reservation_of_locked(address, bytes, "map", &base);
  charge_call_locked();
  const std::size_t first = (address - base) / options_.granularity, count = bytes / options_.granularity;
  require_granules_locked(r, base, first, count, /*mapped=*/false, "map", address);
  if (bytes > options_.capacity - counters_.physical_used) {
    ++counters_.failed_calls;
    throw OutOfMemoryError(fmt::format("simulated device: cannot map {}: {} of {} in use", format_bytes(bytes),
                                       format_bytes(counters_.physical_used), format_bytes(options_.capacity)),
                           bytes);
  }
  if (options_.backed && mprotect(reinterpret_cast<void*>(address), bytes, PROT_READ | PROT_WRITE) != 0)
    throw DeviceError(fmt::format("simulated device: map({:#x}): mprotect failed", address));
  if (r.mapped.size() < first + count) r.mapped.resize(first + count, false);
  for (std::size_t i = first; i < first + count; ++i) r.mapped[i] = true;
  ++counters_.map_calls;
  counters_.physical_used += bytes;
  counters_.mapped_bytes += bytes;
  counters_.physical_peak = std::max(counters_.physical_peak, counters_.physical_used);
}

void SimulatedDevice::unmap(std::uintptr_t address, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  std::uintptr_t base = 0;
  Reservation& r = reservation_of_locked(address, bytes, "unmap", &base);
  charge_call_locked();
  const std::size_t first = (address - base) / options_.granularity, count = bytes / options_.granularity;
  require_granules_locked(r, base, first, count, /*mapped=*/true, "unmap", address);
  if (options_.backed) {
    madvise(reinterpret_cast<void*>(address), bytes, MADV_DONTNEED);
    mprotect(reinterpret_cast<void*>(address), bytes, PROT_NONE);
  }
  for (std::size_t i = first; i < first + count; ++i) r.mapped[i] = false;
  ++counters_.unmap_calls;
  counters_.physical_used -= bytes;
  counters_.mapped_bytes -= bytes;
}

EventBackend::Event SimulatedDevice::record(StreamId stream) {
  std::lock_guard lock(mutex_);
  Event e = next_event_++;
  events_[e] = EventState{stream, streams_[stream].launched};
  return e;
}

bool SimulatedDevice::query(Event event) {
  std::lock_guard lock(mutex_);
  auto it = events_.find(event);
  if (it == events_.end()) throw DeviceError(fmt::format("simulated device: query: unknown event {}", event));
  return streams_[it->second.stream].completed >= it->second.waits_for;
}

void SimulatedDevice::synchronize(Event event) {
  std::lock_guard lock(mutex_);
  auto it = events_.find(event);
  if (it == events_.end()) throw DeviceError(fmt::format("simulated device: synchronize: unknown event {}", event));
  StreamWork& work = streams_[it->second.stream];
  work.completed = std::max(work.completed, it->second.waits_for);
}

void SimulatedDevice::destroy(Event event) noexcept {
  std::lock_guard lock(mutex_);
  events_.erase(event);
}

void SimulatedDevice::launch(StreamId stream) {
  std::lock_guard lock(mutex_);
  ++streams_[stream].launched;
}

void SimulatedDevice::complete(StreamId stream) {
  std::lock_guard lock(mutex_);
  StreamWork& work = streams_[stream];
  work.completed = work.launched;
}

void SimulatedDevice::complete_all() {
  std::lock_guard lock(mutex_);
  for (auto& [stream, work] : streams_) work.completed = work.launched;
}

std::uint64_t SimulatedDevice::launched(StreamId stream) const {
  std::lock_guard lock(mutex_);
  auto it = streams_.find(stream);
  return it == streams_.end() ? 0 : it->second.launched;
}

std::uint64_t SimulatedDevice::completed(StreamId stream) const {
  std::lock_guard lock(mutex_);
  auto it = streams_.find(stream);
  return it == streams_.end() ? 0 : it->second.completed;
}

SimulatedDeviceCounters SimulatedDevice::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

std::size_t SimulatedDevice::physical_used() const {
  std::lock_guard lock(mutex_);
  return counters_.physical_used;
}

std::uint64_t SimulatedDevice::simulated_time_ns() const {
  std::lock_guard lock(mutex_);
  return time_ns_;
}

}  // namespace gpumem::alloc
