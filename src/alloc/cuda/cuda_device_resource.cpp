// cudaMalloc / cudaFree: the plain device backend under the caching
// allocator, as PyTorch's allocator uses it.
#include <cuda_runtime_api.h>

#include <string>

#include "alloc/cuda/cuda_common.h"
#include "gpumem/alloc/cuda.h"
#include "gpumem/common/units.h"

namespace gpumem::alloc {

using cuda_detail::DeviceGuard;

CudaDeviceResource::CudaDeviceResource(int device)
    : device_(cuda_detail::open_device(device, "CudaDeviceResource")) {
  DeviceGuard guard(device_, "CudaDeviceResource");
  std::size_t free_bytes = 0;
  if (cudaError_t status = cudaMemGetInfo(&free_bytes, &total_memory_); status != cudaSuccess) {
    cuda_detail::throw_runtime_error("CudaDeviceResource: cudaMemGetInfo", status);
  }
}

void* CudaDeviceResource::do_allocate(std::size_t bytes, StreamId) {
  // cudaMalloc synchronizes with the whole device, so the stream needs no
  // handling: the memory is usable on any stream once this returns.
  if (bytes == 0) return nullptr;
  const std::string call = "cudaMalloc(" + format_bytes(bytes) + ")";
  DeviceGuard guard(device_, call);
  void* ptr = nullptr;
  cudaError_t status = cudaMalloc(&ptr, bytes);
  cuda_detail::check_allocation(call, status, bytes, device_);
  return ptr;
}

void CudaDeviceResource::do_deallocate(void* ptr, std::size_t, StreamId) noexcept {
  if (ptr == nullptr) return;
  DeviceGuard guard(device_, std::nothrow);
  // cudaFree waits for the device to finish its queued work, which also
  // makes a free from any stream safe.
  if (cudaError_t status = cudaFree(ptr); status != cudaSuccess) {
    cuda_detail::report_runtime_failure("cudaFree", ptr, status);
  }
}

}  // namespace gpumem::alloc
