#pragma once
// The CUDA driver-API functions gpumem uses, looked up through the runtime
// (cudaGetDriverEntryPointByVersion) instead of linked.
//
// Why not link libcuda: the toolkit's libcuda.so is a stub for linking only,
// and its soname, libcuda.so.1, exists only where a driver is installed. A
// program linked to it does not even start on a machine without a driver
// (CI, developers' machines), and every gpumem program would be one, since
// the static libgpumem passes its libraries on. The runtime loads the driver
// itself and says "driver version is insufficient" or "no device" instead.
#include <cuda.h>

namespace gpumem::alloc::cuda_detail {

struct DriverApi {
  decltype(&::cuGetErrorName) cuGetErrorName = nullptr;
  decltype(&::cuGetErrorString) cuGetErrorString = nullptr;
  decltype(&::cuDeviceGet) cuDeviceGet = nullptr;
  decltype(&::cuDeviceGetAttribute) cuDeviceGetAttribute = nullptr;
  decltype(&::cuDevicePrimaryCtxGetState) cuDevicePrimaryCtxGetState = nullptr;
  decltype(&::cuMemGetAllocationGranularity) cuMemGetAllocationGranularity = nullptr;
  decltype(&::cuMemAddressReserve) cuMemAddressReserve = nullptr;
  decltype(&::cuMemAddressFree) cuMemAddressFree = nullptr;
  decltype(&::cuMemCreate) cuMemCreate = nullptr;
  decltype(&::cuMemRelease) cuMemRelease = nullptr;
  decltype(&::cuMemMap) cuMemMap = nullptr;
  decltype(&::cuMemUnmap) cuMemUnmap = nullptr;
  decltype(&::cuMemSetAccess) cuMemSetAccess = nullptr;
};

// The functions, looked up on first use (thread-safe). Throws DeviceError
// naming the function when the runtime cannot find it (no driver, or one
// older than the runtime); the next call tries again.
const DriverApi& driver();

}  // namespace gpumem::alloc::cuda_detail
