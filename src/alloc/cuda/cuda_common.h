#pragma once
// What the CUDA backends share: one-line error messages that name the call
// and CUDA's own error name and text, and a guard that makes a device current
// for the length of a call and restores the caller's device afterwards.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <string_view>

namespace gpumem::alloc::cuda_detail {

// "0x7f3a00000000".
std::string hex(std::uintptr_t address);
std::string hex(const void* ptr);

// "cudaMalloc(2.00 MiB): cudaErrorMemoryAllocation: out of memory".
std::string runtime_error_text(std::string_view call, cudaError_t status);
// "cuMemMap(0x7f3a00000000, 2.00 MiB): CUDA_ERROR_OUT_OF_MEMORY (2): out of memory".
std::string driver_error_text(std::string_view call, CUresult status);

// Throw DeviceError with the texts above. The runtime variant first clears
// the thread's last-error state, so that a caller that checks
// cudaGetLastError() later (PyTorch does after every kernel) does not see
// our failure as its own.
[[noreturn]] void throw_runtime_error(std::string_view call, cudaError_t status);
[[noreturn]] void throw_driver_error(std::string_view call, CUresult status);

// "free 1.20 GiB of 80.00 GiB on device 0" for out-of-memory messages;
// "device 0 (free memory unknown)" when cudaMemGetInfo fails. The device
// must be current.
std::string memory_state(int device);
// Throws for a failed allocation call: OutOfMemoryError (with the device's
// free and total memory) for cudaErrorMemoryAllocation, DeviceError otherwise.
void check_allocation(const std::string& call, cudaError_t status, std::size_t bytes, int device);

// The device a backend works on: `device`, or the current one when it is -1.
// Makes it current and its primary context live (cudaFree(nullptr)), so that
// driver-API calls made later find a context. Throws DeviceError
// "<who>: <reason>" when CUDA or the device is unusable.
int open_device(int device, std::string_view who);

// Makes `device` current for a scope; the caller's device comes back after.
class DeviceGuard {
 public:
  // Throws DeviceError naming `call` when the device cannot be made current.
  DeviceGuard(int device, std::string_view call);
  // For noexcept paths: check ok() before using the device.
  DeviceGuard(int device, std::nothrow_t) noexcept;
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  bool ok() const noexcept { return ok_; }

 private:
  int previous_ = -1;
  bool ok_ = false;
};

// Reports a failure in a path that cannot throw (deallocation, destructors)
// on stderr, one line: "gpumem: cudaFree(0x7f3a00000000): ...". The text is
// built here, inside a try, so callers build no string that could throw.
// Errors during process teardown, when CUDA is already unloading, are
// expected and stay quiet.
void report_runtime_failure(const char* function, const void* ptr, cudaError_t status) noexcept;
// "gpumem: cuMemUnmap(0x7f3a00000000, 2.00 MiB): ..."; bytes 0 leaves the size out.
void report_driver_failure(const char* function, std::uintptr_t address, std::size_t bytes,
                           CUresult status) noexcept;

}  // namespace gpumem::alloc::cuda_detail
