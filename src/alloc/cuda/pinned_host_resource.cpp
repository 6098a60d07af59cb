// Page-locked host memory (cudaMallocHost / cudaFreeHost): staging buffers
// for copies that overlap with kernels.
#include <cuda_runtime_api.h>

#include <string>

#include "alloc/cuda/cuda_common.h"
#include "gpumem/alloc/cuda.h"
#include "gpumem/common/units.h"

namespace gpumem::alloc {

PinnedHostResource::PinnedHostResource() {
  // Pinning needs a working driver; find out now rather than at the first
  // allocation.
  cuda_detail::open_device(-1, "PinnedHostResource");
}

void* PinnedHostResource::do_allocate(std::size_t bytes, StreamId) {
  if (bytes == 0) return nullptr;
  const std::string call = "cudaMallocHost(" + format_bytes(bytes) + ")";
  void* ptr = nullptr;
  cudaError_t status = cudaMallocHost(&ptr, bytes);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    throw OutOfMemoryError(call + ": out of pinned host memory: requested " + std::to_string(bytes) + " bytes",
                           bytes);
  }
  if (status != cudaSuccess) cuda_detail::throw_runtime_error(call, status);
  return ptr;
}

void PinnedHostResource::do_deallocate(void* ptr, std::size_t, StreamId) noexcept {
  if (ptr == nullptr) return;
  if (cudaError_t status = cudaFreeHost(ptr); status != cudaSuccess) {
    cuda_detail::report_runtime_failure("cudaFreeHost", ptr, status);
  }
}

}  // namespace gpumem::alloc
