// Stream-ordered allocation from a CUDA memory pool of our own
// (cudaMallocFromPoolAsync / cudaFreeAsync): the driver's caching allocator,
// as a baseline and an upstream that never synchronizes the device.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "alloc/cuda/cuda_common.h"
#include "gpumem/alloc/cuda.h"
#include "gpumem/common/units.h"

namespace gpumem::alloc {

using cuda_detail::DeviceGuard;

namespace {

cudaStream_t to_stream(StreamId stream) { return reinterpret_cast<cudaStream_t>(stream); }

}  // namespace

CudaAsyncPoolResource::CudaAsyncPoolResource(std::size_t release_threshold, int device)
    : device_(cuda_detail::open_device(device, "CudaAsyncPoolResource")) {
  DeviceGuard guard(device_, "CudaAsyncPoolResource");
  int supported = 0;
  if (cudaError_t status = cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device_);
      status != cudaSuccess) {
    cuda_detail::throw_runtime_error("CudaAsyncPoolResource: cudaDeviceGetAttribute(MemoryPoolsSupported)", status);
  }
  if (supported == 0) {
    throw DeviceError("CudaAsyncPoolResource: device " + std::to_string(device_) +
                      " does not support memory pools (cudaDevAttrMemoryPoolsSupported is 0)");
  }
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device_;
  cudaMemPool_t pool = nullptr;
  if (cudaError_t status = cudaMemPoolCreate(&pool, &props); status != cudaSuccess) {
    cuda_detail::throw_runtime_error("CudaAsyncPoolResource: cudaMemPoolCreate", status);
  }
  pool_ = pool;
  // The default threshold is 0: the pool would hand all free memory back at
  // every synchronization, which is what a caching resource must not do.
  std::uint64_t threshold = release_threshold;
  if (cudaError_t status = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold);
      status != cudaSuccess) {
    cudaMemPoolDestroy(pool);
    cuda_detail::throw_runtime_error(
        "CudaAsyncPoolResource: cudaMemPoolSetAttribute(ReleaseThreshold, " + std::to_string(threshold) + ")",
        status);
  }
}

CudaAsyncPoolResource::~CudaAsyncPoolResource() {
  if (pool_ == nullptr) return;
  DeviceGuard guard(device_, std::nothrow);
  // Allocations still outstanding keep the pool alive until they are freed.
  if (cudaError_t status = cudaMemPoolDestroy(static_cast<cudaMemPool_t>(pool_)); status != cudaSuccess) {
    cuda_detail::report_runtime_failure("cudaMemPoolDestroy", pool_, status);
  }
}

void* CudaAsyncPoolResource::do_allocate(std::size_t bytes, StreamId stream) {
  if (bytes == 0) return nullptr;
  const std::string call = "cudaMallocFromPoolAsync(" + format_bytes(bytes) + ", stream " +
                           cuda_detail::hex(static_cast<std::uintptr_t>(stream)) + ")";
  DeviceGuard guard(device_, call);
  void* ptr = nullptr;
  cudaError_t status =
      cudaMallocFromPoolAsync(&ptr, bytes, static_cast<cudaMemPool_t>(pool_), to_stream(stream));
  cuda_detail::check_allocation(call, status, bytes, device_);
  return ptr;
}

void CudaAsyncPoolResource::do_deallocate(void* ptr, std::size_t, StreamId stream) noexcept {
  if (ptr == nullptr) return;
  DeviceGuard guard(device_, std::nothrow);
  // Freed in `stream`'s order: the pool reuses the memory for later work on
  // that stream at once, and for other streams once this point is reached.
  if (cudaError_t status = cudaFreeAsync(ptr, to_stream(stream)); status != cudaSuccess) {
    cuda_detail::report_runtime_failure("cudaFreeAsync", ptr, status);
  }
}

}  // namespace gpumem::alloc
