// Events on CUDA streams, for the caching allocator's cross-stream frees.
// Events are created without timing (cheaper to record and query) and kept
// for reuse once destroyed: a busy training loop records one per
// cross-stream free.
#include <cuda_runtime_api.h>

#include <string>

#include "alloc/cuda/cuda_common.h"
#include "gpumem/alloc/cuda.h"

namespace gpumem::alloc {

using cuda_detail::DeviceGuard;
using cuda_detail::hex;

namespace {

cudaEvent_t to_event(EventBackend::Event event) { return reinterpret_cast<cudaEvent_t>(event); }

}  // namespace

CudaEvents::CudaEvents(int device) : device_(cuda_detail::open_device(device, "CudaEvents")) {}

CudaEvents::~CudaEvents() {
  std::lock_guard lock(mutex_);
  DeviceGuard guard(device_, std::nothrow);
  for (void* event : spare_) {
    if (cudaError_t status = cudaEventDestroy(static_cast<cudaEvent_t>(event)); status != cudaSuccess) {
      cuda_detail::report_runtime_failure("cudaEventDestroy", event, status);
    }
  }
}

EventBackend::Event CudaEvents::record(StreamId stream) {
  const std::string call = "cudaEventRecord(stream " + hex(static_cast<std::uintptr_t>(stream)) + ")";
  cudaEvent_t event = nullptr;
  {
    std::lock_guard lock(mutex_);
    if (!spare_.empty()) {
      event = static_cast<cudaEvent_t>(spare_.back());
      spare_.pop_back();
    }
  }
  // The device must be current both to create the event and so that stream
  // 0 means this device's default stream.
  DeviceGuard guard(device_, call);
  if (event == nullptr) {
    if (cudaError_t status = cudaEventCreateWithFlags(&event, cudaEventDisableTiming); status != cudaSuccess) {
      cuda_detail::throw_runtime_error("cudaEventCreateWithFlags(cudaEventDisableTiming)", status);
    }
  }
  if (cudaError_t status = cudaEventRecord(event, reinterpret_cast<cudaStream_t>(stream)); status != cudaSuccess) {
    destroy(reinterpret_cast<Event>(event));
    cuda_detail::throw_runtime_error(call, status);
  }
  return reinterpret_cast<Event>(event);
}

bool CudaEvents::query(Event event) {
  cudaError_t status = cudaEventQuery(to_event(event));
  if (status == cudaSuccess) return true;
  if (status == cudaErrorNotReady) {
    // Not an error, but the runtime still remembers it as the last one.
    cudaGetLastError();
    return false;
  }
  cuda_detail::throw_runtime_error("cudaEventQuery(" + hex(to_event(event)) + ")", status);
}

void CudaEvents::synchronize(Event event) {
  if (cudaError_t status = cudaEventSynchronize(to_event(event)); status != cudaSuccess) {
    cuda_detail::throw_runtime_error("cudaEventSynchronize(" + hex(to_event(event)) + ")", status);
  }
}

void CudaEvents::destroy(Event event) noexcept {
  if (event == 0) return;
  try {
    std::lock_guard lock(mutex_);
    spare_.push_back(to_event(event));
  } catch (...) {
    // No memory to keep it: destroy it instead.
    if (cudaError_t status = cudaEventDestroy(to_event(event)); status != cudaSuccess) {
      cuda_detail::report_runtime_failure("cudaEventDestroy", to_event(event), status);
    }
  }
}

}  // namespace gpumem::alloc
