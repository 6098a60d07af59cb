#pragma once
// CUDA backends. They are compiled when CMake finds the CUDA toolkit
// (GPUMEM_HAVE_CUDA); otherwise, and when there is no usable device, their
// constructors throw DeviceError saying why. All of them work on the device
// that is current when they are created, or on `device` when given.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpumem/alloc/memory_resource.h"

namespace gpumem::alloc {

// Whether this build has CUDA, and whether a device answers: "" when a
// device is usable, otherwise the reason (for test skip messages), e.g.
// "no CUDA device: cudaGetDeviceCount: CUDA driver version is insufficient
// for CUDA runtime version".
std::string cuda_unavailable_reason();
bool built_with_cuda() noexcept;

// cudaMalloc / cudaFree.
class CudaDeviceResource final : public MemoryResource {
 public:
  explicit CudaDeviceResource(int device = -1);
  std::string name() const override { return "cuda"; }
  int device() const noexcept { return device_; }
  std::size_t total_memory() const noexcept { return total_memory_; }

 protected:
  void* do_allocate(std::size_t bytes, StreamId stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, StreamId stream) noexcept override;

 private:
  int device_ = 0;
  std::size_t total_memory_ = 0;
};

// Stream-ordered allocation from a CUDA memory pool (cudaMallocFromPoolAsync /
// cudaFreeAsync). The pool keeps up to release_threshold bytes cached
// across synchronizations.
class CudaAsyncPoolResource final : public MemoryResource {
 public:
  explicit CudaAsyncPoolResource(std::size_t release_threshold = SIZE_MAX, int device = -1);
  ~CudaAsyncPoolResource() override;
  std::string name() const override { return "cuda-async-pool"; }

 protected:
  void* do_allocate(std::size_t bytes, StreamId stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, StreamId stream) noexcept override;

 private:
  int device_ = 0;
  void* pool_ = nullptr;  // cudaMemPool_t
};

// Page-locked host memory (cudaMallocHost / cudaFreeHost).
class PinnedHostResource final : public MemoryResource {
 public:
  PinnedHostResource();
  std::string name() const override { return "cuda-pinned-host"; }

 protected:
  void* do_allocate(std::size_t bytes, StreamId stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, StreamId stream) noexcept override;
};

// CUDA virtual memory management: cuMemAddressReserve, cuMemCreate (one
// physical allocation per granule, so any granule can be unmapped on its
// own), cuMemMap, cuMemSetAccess.
class CudaVirtualMemory final : public VirtualMemory {
 public:
  explicit CudaVirtualMemory(int device = -1);
  ~CudaVirtualMemory() override;
  std::size_t granularity() const noexcept override { return granularity_; }
  std::uintptr_t reserve(std::size_t bytes) override;
  void release(std::uintptr_t base, std::size_t bytes) override;
  void map(std::uintptr_t address, std::size_t bytes) override;
  void unmap(std::uintptr_t address, std::size_t bytes) override;
  std::size_t physical_capacity() const noexcept override { return total_memory_; }

 private:
  int device_ = 0;
  std::size_t granularity_ = 0;
  std::size_t total_memory_ = 0;
  std::mutex mutex_;
  std::unordered_map<std::uintptr_t, std::uint64_t> handles_;  // granule -> CUmemGenericAllocationHandle
};

// Events on CUDA streams (cudaEventRecord / Query / Synchronize); StreamId is
// a cudaStream_t cast to an integer.
class CudaEvents final : public EventBackend {
 public:
  explicit CudaEvents(int device = -1);
  ~CudaEvents() override;
  Event record(StreamId stream) override;
  bool query(Event event) override;
  void synchronize(Event event) override;
  void destroy(Event event) noexcept override;

 private:
  int device_ = 0;
  std::mutex mutex_;
  std::vector<void*> spare_;  // destroyed events kept for reuse (cudaEvent_t)
};

}  // namespace gpumem::alloc
