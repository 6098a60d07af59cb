// CUDA virtual memory management for expandable segments: reserve address
// space once, then back it granule by granule. Each granule is its own
// physical allocation (cuMemCreate), so any granule can be given back
// without touching its neighbours.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "alloc/cuda/cuda_common.h"
#include "alloc/cuda/cuda_driver.h"
#include "gpumem/alloc/cuda.h"
#include "gpumem/common/units.h"

namespace gpumem::alloc {

using cuda_detail::DeviceGuard;
using cuda_detail::driver;
using cuda_detail::hex;

namespace {

CUmemAllocationProp pinned_device_memory(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

// "cuMemMap(0x7f3a00000000, 2.00 MiB)".
std::string call_text(const char* function, std::uintptr_t address, std::size_t bytes) {
  return std::string(function) + "(" + hex(address) + ", " + format_bytes(bytes) + ")";
}

}  // namespace

CudaVirtualMemory::CudaVirtualMemory(int device)
    : device_(cuda_detail::open_device(device, "CudaVirtualMemory")) {
  DeviceGuard guard(device_, "CudaVirtualMemory");
  try {
    driver();
  } catch (const DeviceError& e) {
    throw DeviceError(std::string("CudaVirtualMemory: ") + e.what());
  }
  CUdevice handle = 0;
  if (CUresult status = driver().cuDeviceGet(&handle, device_); status != CUDA_SUCCESS) {
    cuda_detail::throw_driver_error("CudaVirtualMemory: cuDeviceGet(" + std::to_string(device_) + ")", status);
  }
  int supported = 0;
  if (CUresult status =
          driver().cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, handle);
      status != CUDA_SUCCESS) {
    cuda_detail::throw_driver_error("CudaVirtualMemory: cuDeviceGetAttribute(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)",
                                    status);
  }
  if (supported == 0) {
    throw DeviceError("CudaVirtualMemory: device " + std::to_string(device_) +
                      " does not support virtual memory management");
  }
  const CUmemAllocationProp prop = pinned_device_memory(device_);
  if (CUresult status = driver().cuMemGetAllocationGranularity(&granularity_, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
      status != CUDA_SUCCESS) {
    cuda_detail::throw_driver_error("CudaVirtualMemory: cuMemGetAllocationGranularity", status);
  }
  std::size_t free_bytes = 0;
  if (cudaError_t status = cudaMemGetInfo(&free_bytes, &total_memory_); status != cudaSuccess) {
    cuda_detail::throw_runtime_error("CudaVirtualMemory: cudaMemGetInfo", status);
  }
}

CudaVirtualMemory::~CudaVirtualMemory() {
  // The caching allocator unmaps everything before it goes; what is left is
  // a caller's leak, given back here so the device memory is not lost. Address
  // ranges are not tracked: the driver reclaims them with the context.
  std::lock_guard lock(mutex_);
  if (handles_.empty()) return;
  DeviceGuard guard(device_, std::nothrow);
  if (cudaDeviceSynchronize() != cudaSuccess) cudaGetLastError();
  for (const auto& [address, handle] : handles_) {
    if (CUresult status = driver().cuMemUnmap(address, granularity_); status != CUDA_SUCCESS) {
      cuda_detail::report_driver_failure("cuMemUnmap", address, granularity_, status);
    }
    if (CUresult status = driver().cuMemRelease(handle); status != CUDA_SUCCESS) {
      cuda_detail::report_driver_failure("cuMemRelease", address, granularity_, status);
    }
  }
}

std::uintptr_t CudaVirtualMemory::reserve(std::size_t bytes) {
  if (bytes == 0 || bytes % granularity_ != 0) {
    throw DeviceError("CudaVirtualMemory::reserve(" + std::to_string(bytes) +
                      " bytes): size is not a positive multiple of the granularity " +
                      std::to_string(granularity_));
  }
  const std::string call = "cuMemAddressReserve(" + format_bytes(bytes) + ")";
  DeviceGuard guard(device_, call);
  CUdeviceptr base = 0;
  CUresult status = driver().cuMemAddressReserve(&base, bytes, granularity_, 0, 0);
  if (status == CUDA_ERROR_OUT_OF_MEMORY) {
    throw OutOfMemoryError(cuda_detail::driver_error_text(call, status) + " (virtual address space exhausted)", bytes);
  }
  if (status != CUDA_SUCCESS) cuda_detail::throw_driver_error(call, status);
  return static_cast<std::uintptr_t>(base);
}

void CudaVirtualMemory::release(std::uintptr_t base, std::size_t bytes) {
  {
    std::lock_guard lock(mutex_);
    // Look the range up from whichever side is smaller: ranges can be huge
    // and mostly unmapped.
    const std::size_t granules = bytes / granularity_;
    bool mapped = false;
    if (handles_.size() < granules) {
      for (const auto& [address, handle] : handles_) mapped = mapped || (address >= base && address - base < bytes);
    } else {
      for (std::size_t i = 0; i < granules && !mapped; ++i) mapped = handles_.count(base + i * granularity_) != 0;
    }
    if (mapped) {
      throw DeviceError(call_text("CudaVirtualMemory::release", base, bytes) + ": part of the range is still mapped");
    }
  }
  DeviceGuard guard(device_, "cuMemAddressFree");
  if (CUresult status = driver().cuMemAddressFree(base, bytes); status != CUDA_SUCCESS) {
    cuda_detail::throw_driver_error(call_text("cuMemAddressFree", base, bytes), status);
  }
}

void CudaVirtualMemory::map(std::uintptr_t address, std::size_t bytes) {
  if (bytes == 0 || bytes % granularity_ != 0 || address % granularity_ != 0) {
    throw DeviceError(call_text("CudaVirtualMemory::map", address, bytes) +
                      ": address and size must be multiples of the granularity " + std::to_string(granularity_));
  }
  std::lock_guard lock(mutex_);
  for (std::uintptr_t granule = address; granule < address + bytes; granule += granularity_) {
    if (handles_.count(granule) != 0) {
      throw DeviceError(call_text("CudaVirtualMemory::map", address, bytes) + ": " + hex(granule) +
                        " is already mapped");
    }
  }
  DeviceGuard guard(device_, call_text("CudaVirtualMemory::map", address, bytes));

  // Granules mapped by this call, unmapped again if a later one fails, so a
  // failed map leaves nothing behind.
  std::vector<std::uintptr_t> done;
  auto roll_back = [&] {
    for (std::uintptr_t granule : done) {
      if (CUresult status = driver().cuMemUnmap(granule, granularity_); status != CUDA_SUCCESS) {
        cuda_detail::report_driver_failure("cuMemUnmap", granule, granularity_, status);
      }
      if (CUresult status = driver().cuMemRelease(handles_.at(granule)); status != CUDA_SUCCESS) {
        cuda_detail::report_driver_failure("cuMemRelease", granule, granularity_, status);
      }
      handles_.erase(granule);
    }
  };
  auto fail = [&](const std::string& call, CUresult status) {
    roll_back();
    std::string text = cuda_detail::driver_error_text(call, status);
    if (status == CUDA_ERROR_OUT_OF_MEMORY) {
      throw OutOfMemoryError(text + ": mapping " + format_bytes(bytes) + " at " + hex(address) + ", " +
                                 cuda_detail::memory_state(device_),
                             bytes);
    }
    throw DeviceError(text);
  };

  const CUmemAllocationProp prop = pinned_device_memory(device_);
  done.reserve(bytes / granularity_);
  for (std::uintptr_t granule = address; granule < address + bytes; granule += granularity_) {
    CUmemGenericAllocationHandle handle = 0;
    if (CUresult status = driver().cuMemCreate(&handle, granularity_, &prop, 0); status != CUDA_SUCCESS) {
      fail("cuMemCreate(" + format_bytes(granularity_) + ")", status);
    }
    if (CUresult status = driver().cuMemMap(granule, granularity_, 0, handle, 0); status != CUDA_SUCCESS) {
      driver().cuMemRelease(handle);
      fail(call_text("cuMemMap", granule, granularity_), status);
    }
    handles_.emplace(granule, handle);
    done.push_back(granule);
  }
  // One access call for the whole range, as PyTorch's expandable segments do.
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device_;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (CUresult status = driver().cuMemSetAccess(address, bytes, &access, 1); status != CUDA_SUCCESS) {
    fail(call_text("cuMemSetAccess", address, bytes), status);
  }
}

void CudaVirtualMemory::unmap(std::uintptr_t address, std::size_t bytes) {
  if (bytes == 0 || bytes % granularity_ != 0 || address % granularity_ != 0) {
    throw DeviceError(call_text("CudaVirtualMemory::unmap", address, bytes) +
                      ": address and size must be multiples of the granularity " + std::to_string(granularity_));
  }
  std::lock_guard lock(mutex_);
  for (std::uintptr_t granule = address; granule < address + bytes; granule += granularity_) {
    if (handles_.count(granule) == 0) {
      throw DeviceError(call_text("CudaVirtualMemory::unmap", address, bytes) + ": " + hex(granule) +
                        " is not mapped");
    }
  }
  DeviceGuard guard(device_, call_text("CudaVirtualMemory::unmap", address, bytes));
  // Unlike cudaFree, cuMemUnmap and cuMemRelease do not wait for kernels
  // still using the memory (PyTorch synchronizes here too).
  if (cudaError_t status = cudaDeviceSynchronize(); status != cudaSuccess) {
    cuda_detail::throw_runtime_error(call_text("CudaVirtualMemory::unmap", address, bytes) + ": cudaDeviceSynchronize",
                                     status);
  }
  for (std::uintptr_t granule = address; granule < address + bytes; granule += granularity_) {
    auto it = handles_.find(granule);
    if (CUresult status = driver().cuMemUnmap(granule, granularity_); status != CUDA_SUCCESS) {
      cuda_detail::throw_driver_error(call_text("cuMemUnmap", granule, granularity_), status);
    }
    // Unmapped is what counts for the address range: forget the granule
    // before a release failure can throw.
    const CUmemGenericAllocationHandle handle = it->second;
    handles_.erase(it);
    if (CUresult status = driver().cuMemRelease(handle); status != CUDA_SUCCESS) {
      cuda_detail::throw_driver_error(call_text("cuMemRelease", granule, granularity_), status);
    }
  }
}

}  // namespace gpumem::alloc
