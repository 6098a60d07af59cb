// Whether this build has CUDA and whether a device answers.
#include <cuda_runtime_api.h>

#include <string>

#include "alloc/cuda/cuda_common.h"
#include "gpumem/alloc/cuda.h"

namespace gpumem::alloc {

bool built_with_cuda() noexcept { return true; }

std::string cuda_unavailable_reason() {
  // cudaGetDeviceCount is the cheap question: it loads the driver but creates
  // no context, and answers "driver version is insufficient" or "no CUDA-capable
  // device" on machines where nothing else would work either.
  int count = 0;
  if (cudaError_t status = cudaGetDeviceCount(&count); status != cudaSuccess) {
    cudaGetLastError();
    return "no CUDA device: " + cuda_detail::runtime_error_text("cudaGetDeviceCount", status);
  }
  if (count == 0) return "no CUDA device: cudaGetDeviceCount found none";
  return "";
}

}  // namespace gpumem::alloc
