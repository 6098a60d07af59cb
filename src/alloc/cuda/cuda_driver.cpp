#include "alloc/cuda/cuda_driver.h"

#include <cuda_runtime_api.h>

#include <string>

#include "gpumem/alloc/memory_resource.h"

namespace gpumem::alloc::cuda_detail {

namespace {

template <typename Fn>
void look_up(Fn& fn, const char* symbol) {
  void* address = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  // The version of each function is the one this runtime's headers declare,
  // so the pointer's type matches what the driver hands back.
#if CUDART_VERSION >= 12050
  cudaError_t status = cudaGetDriverEntryPointByVersion(symbol, &address, CUDART_VERSION, cudaEnableDefault, &found);
#else
  cudaError_t status = cudaGetDriverEntryPoint(symbol, &address, cudaEnableDefault, &found);
#endif
  if (status != cudaSuccess || found != cudaDriverEntryPointSuccess || address == nullptr) {
    cudaGetLastError();
    std::string why = status != cudaSuccess                                  ? cudaGetErrorString(status)
                      : found == cudaDriverEntryPointVersionNotSufficent ? "the driver is older than CUDA " +
                                                                                 std::to_string(CUDART_VERSION)
                                                                           : "symbol not found";
    throw DeviceError(std::string("cudaGetDriverEntryPoint(") + symbol + "): " + why);
  }
  fn = reinterpret_cast<Fn>(address);
}

DriverApi load() {
  DriverApi api;
  look_up(api.cuGetErrorName, "cuGetErrorName");
  look_up(api.cuGetErrorString, "cuGetErrorString");
  look_up(api.cuDeviceGet, "cuDeviceGet");
  look_up(api.cuDeviceGetAttribute, "cuDeviceGetAttribute");
  look_up(api.cuDevicePrimaryCtxGetState, "cuDevicePrimaryCtxGetState");
  look_up(api.cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity");
  look_up(api.cuMemAddressReserve, "cuMemAddressReserve");
  look_up(api.cuMemAddressFree, "cuMemAddressFree");
  look_up(api.cuMemCreate, "cuMemCreate");
  look_up(api.cuMemRelease, "cuMemRelease");
  look_up(api.cuMemMap, "cuMemMap");
  look_up(api.cuMemUnmap, "cuMemUnmap");
  look_up(api.cuMemSetAccess, "cuMemSetAccess");
  return api;
}

}  // namespace

const DriverApi& driver() {
  static const DriverApi api = load();
  return api;
}

}  // namespace gpumem::alloc::cuda_detail
