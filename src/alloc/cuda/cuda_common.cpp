#include "alloc/cuda/cuda_common.h"

#include <cstdio>

#include "alloc/cuda/cuda_driver.h"
#include "gpumem/alloc/memory_resource.h"
#include "gpumem/common/units.h"

namespace gpumem::alloc::cuda_detail {

std::string hex(std::uintptr_t address) {
  char text[2 + 2 * sizeof(std::uintptr_t) + 1];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(address));
  return text;
}

std::string hex(const void* ptr) { return hex(reinterpret_cast<std::uintptr_t>(ptr)); }

std::string runtime_error_text(std::string_view call, cudaError_t status) {
  std::string text(call);
  text += ": ";
  text += cudaGetErrorName(status);
  text += ": ";
  text += cudaGetErrorString(status);
  return text;
}

std::string driver_error_text(std::string_view call, CUresult status) {
  // cuGetError* leave the out-parameter alone for codes they do not know.
  const char* name = "CUDA_ERROR_UNKNOWN_CODE";
  const char* what = "unrecognized error code";
  try {
    driver().cuGetErrorName(status, &name);
    driver().cuGetErrorString(status, &what);
  } catch (const DeviceError&) {
    // No driver to name the code: the number below still identifies it.
  }
  std::string text(call);
  text += ": ";
  text += name;
  text += " (";
  text += std::to_string(static_cast<int>(status));
  text += "): ";
  text += what;
  return text;
}

void throw_runtime_error(std::string_view call, cudaError_t status) {
  cudaGetLastError();
  throw DeviceError(runtime_error_text(call, status));
}

void throw_driver_error(std::string_view call, CUresult status) {
  throw DeviceError(driver_error_text(call, status));
}

std::string memory_state(int device) {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    cudaGetLastError();
    return "device " + std::to_string(device) + " (free memory unknown)";
  }
  return "free " + format_bytes(free_bytes) + " of " + format_bytes(total_bytes) + " on device " +
         std::to_string(device);
}

void check_allocation(const std::string& call, cudaError_t status, std::size_t bytes, int device) {
  if (status == cudaSuccess) return;
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear the sticky-free error so later calls succeed
    throw OutOfMemoryError(
        call + ": out of memory: requested " + std::to_string(bytes) + " bytes, " + memory_state(device), bytes);
  }
  throw_runtime_error(call, status);
}

int open_device(int device, std::string_view who) {
  const std::string prefix = std::string(who) + ": ";
  int count = 0;
  if (cudaError_t status = cudaGetDeviceCount(&count); status != cudaSuccess) {
    cudaGetLastError();
    throw DeviceError(prefix + "no CUDA device: " + runtime_error_text("cudaGetDeviceCount", status));
  }
  if (count == 0) throw DeviceError(prefix + "no CUDA device: cudaGetDeviceCount found none");
  if (device < 0) {
    if (cudaError_t status = cudaGetDevice(&device); status != cudaSuccess) {
      throw_runtime_error(prefix + "cudaGetDevice", status);
    }
  }
  if (device >= count) {
    throw DeviceError(prefix + "device " + std::to_string(device) + " does not exist (" +
                      std::to_string(count) + " CUDA devices)");
  }
  DeviceGuard guard(device, prefix + "cudaSetDevice(" + std::to_string(device) + ")");
  // cudaFree(nullptr) is the documented way to create the primary context;
  // the driver-API calls of CudaVirtualMemory need one.
  if (cudaError_t status = cudaFree(nullptr); status != cudaSuccess) {
    throw_runtime_error(prefix + "cudaFree(nullptr) on device " + std::to_string(device), status);
  }
  return device;
}

namespace {

// Whether the primary context of `device` exists. Restoring a device the
// thread never really used would create a context there (hundreds of MiB on
// the device) for nothing.
bool primary_context_active(int device) noexcept {
  try {
    CUdevice handle = 0;
    if (driver().cuDeviceGet(&handle, device) != CUDA_SUCCESS) return false;
    unsigned int flags = 0;
    int active = 0;
    if (driver().cuDevicePrimaryCtxGetState(handle, &flags, &active) != CUDA_SUCCESS) return false;
    return active != 0;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

DeviceGuard::DeviceGuard(int device, std::string_view call) {
  if (cudaError_t status = cudaGetDevice(&previous_); status != cudaSuccess) {
    throw_runtime_error(std::string(call) + ": cudaGetDevice", status);
  }
  if (previous_ != device) {
    if (cudaError_t status = cudaSetDevice(device); status != cudaSuccess) {
      throw_runtime_error(std::string(call) + ": cudaSetDevice(" + std::to_string(device) + ")", status);
    }
  }
  ok_ = true;
  if (previous_ == device) previous_ = -1;
}

DeviceGuard::DeviceGuard(int device, std::nothrow_t) noexcept {
  if (cudaGetDevice(&previous_) != cudaSuccess) {
    cudaGetLastError();
    previous_ = -1;
    return;
  }
  if (previous_ == device) {
    previous_ = -1;
    ok_ = true;
    return;
  }
  ok_ = cudaSetDevice(device) == cudaSuccess;
  if (!ok_) {
    cudaGetLastError();
    previous_ = -1;
  }
}

DeviceGuard::~DeviceGuard() {
  if (previous_ < 0) return;
  if (primary_context_active(previous_)) {
    if (cudaSetDevice(previous_) != cudaSuccess) cudaGetLastError();
  }
}

void report_runtime_failure(const char* function, const void* ptr, cudaError_t status) noexcept {
  cudaGetLastError();
  if (status == cudaErrorCudartUnloading) return;
  try {
    const std::string call = std::string(function) + "(" + hex(ptr) + ")";
    std::fprintf(stderr, "gpumem: %s\n", runtime_error_text(call, status).c_str());
  } catch (...) {
    // Out of host memory while reporting: nothing left to do.
  }
}

void report_driver_failure(const char* function, std::uintptr_t address, std::size_t bytes,
                           CUresult status) noexcept {
  if (status == CUDA_ERROR_DEINITIALIZED) return;
  try {
    std::string call = std::string(function) + "(" + hex(address);
    if (bytes != 0) call += ", " + format_bytes(bytes);
    call += ")";
    std::fprintf(stderr, "gpumem: %s\n", driver_error_text(call, status).c_str());
  } catch (...) {
  }
}

}  // namespace gpumem::alloc::cuda_detail
