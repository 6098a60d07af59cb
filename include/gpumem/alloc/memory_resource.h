#pragma once
// The memory-resource interface every allocator piece implements.
//
// As in RMM, a resource hands out device memory and may sit over an upstream
// resource; features are added by stacking adaptors (statistics, a byte
// budget, tracing) over a backend (the simulated GPU, host memory, CUDA).
// Device memory is never touched through these pointers on the host: a
// pointer is an address, and sizes are exact bytes.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace gpumem::alloc {

// A stream as the backend names it: a cudaStream_t cast to an integer, or a
// simulated stream's number. 0 is the default stream.
using StreamId = std::uint64_t;
inline constexpr StreamId kDefaultStream = 0;

// Every device allocation is aligned to at least this (CUDA guarantees 256).
inline constexpr std::size_t kDeviceAlignment = 256;

// Requests and limits beyond this are refused rather than rounded, so that
// no allocator's size arithmetic can overflow.
inline constexpr std::size_t kMaxBytes = std::size_t{1} << 60;

// `n` rounded up to a multiple of `unit`: the size arithmetic every
// allocator shares.
template <typename T>
constexpr T round_up(T n, T unit) {
  return (n + unit - 1) / unit * unit;
}

// The request cannot be met: the device (or the byte budget) is full. The
// message explains the state; allocators that know more say more.
class OutOfMemoryError : public std::runtime_error {
 public:
  OutOfMemoryError(const std::string& message, std::size_t requested_bytes)
      : std::runtime_error(message), requested_bytes_(requested_bytes) {}
  std::size_t requested_bytes() const noexcept { return requested_bytes_; }

 private:
  std::size_t requested_bytes_;
};

// The backend failed for another reason (no device, driver too old, a bad
// pointer handed back). The message says which call failed and why.
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class MemoryResource {
 public:
  virtual ~MemoryResource() = default;

  // At least `alignment()`-aligned memory of `bytes` bytes, usable in stream
  // order on `stream`. Throws OutOfMemoryError or DeviceError. A request of 0
  // bytes returns nullptr.
  void* allocate(std::size_t bytes, StreamId stream = kDefaultStream) { return do_allocate(bytes, stream); }
  // Returns memory from allocate() with the same size. Passing a stream other
  // than the allocation's means the memory is free once that stream's queued
  // work completes.
  void deallocate(void* ptr, std::size_t bytes, StreamId stream = kDefaultStream) noexcept {
    do_deallocate(ptr, bytes, stream);
  }

  // The alignment every pointer from this resource has.
  virtual std::size_t alignment() const noexcept { return kDeviceAlignment; }
  // A short name for messages and reports, e.g. "simulated-device".
  virtual std::string name() const = 0;

 protected:
  virtual void* do_allocate(std::size_t bytes, StreamId stream) = 0;
  virtual void do_deallocate(void* ptr, std::size_t bytes, StreamId stream) noexcept = 0;
};

// Backends that can reserve virtual address ranges and map physical memory
// into them in granules (CUDA's cuMemAddressReserve/cuMemCreate/cuMemMap and
// the simulated device). Expandable segments grow a range this way, so freed
// space can be given back without the range ever splitting into pieces.
class VirtualMemory {
 public:
  virtual ~VirtualMemory() = default;

  // Mapping unit; every map/unmap address and size is a multiple of it.
  virtual std::size_t granularity() const noexcept = 0;
  // Reserves `bytes` of address space (a multiple of granularity()); nothing
  // is backed yet. Throws OutOfMemoryError when address space runs out.
  virtual std::uintptr_t reserve(std::size_t bytes) = 0;
  // Gives a reserved range back; every part of it must be unmapped first.
  virtual void release(std::uintptr_t base, std::size_t bytes) = 0;
  // Backs [address, address + bytes) with physical memory. Throws
  // OutOfMemoryError when the device has too little left.
  virtual void map(std::uintptr_t address, std::size_t bytes) = 0;
  // Frees the physical memory behind [address, address + bytes).
  virtual void unmap(std::uintptr_t address, std::size_t bytes) = 0;
  // Physical bytes the device has in all; 0 when unknown.
  virtual std::size_t physical_capacity() const noexcept = 0;
};

// Streams and events, behind an interface so that the simulated device can
// drive them in tests: the caching allocator records an event on a stream
// that still uses a freed block and reuses the block once the event is done.
class EventBackend {
 public:
  using Event = std::uint64_t;
  virtual ~EventBackend() = default;

  // An event that completes once the work queued on `stream` so far is done.
  virtual Event record(StreamId stream) = 0;
  // Whether `event` has completed. Does not block.
  virtual bool query(Event event) = 0;
  // Blocks until `event` completes.
  virtual void synchronize(Event event) = 0;
  // Frees the event; it is not used again.
  virtual void destroy(Event event) noexcept = 0;
};

}  // namespace gpumem::alloc
