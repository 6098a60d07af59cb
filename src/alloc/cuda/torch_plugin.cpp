// libgpumem_torch.so: gpumem's caching allocator as PyTorch's CUDA allocator,
// loaded with torch.cuda.memory.CUDAPluggableAllocator(path,
// "gpumem_torch_alloc", "gpumem_torch_free").
//
// One CachingAllocator per device, made on the device's first allocation
// from GPUMEM_ALLOC_CONF, over cudaMalloc (or, with expandable_segments, over
// CUDA virtual memory) with CUDA events for cross-stream frees. The extras
// (stats, snapshot, summary, empty_cache) are for ctypes: PyTorch's own
// torch.cuda.memory_stats() and friends do not reach a pluggable allocator.
#include <cuda_runtime_api.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>

#include <nlohmann/json.hpp>

#include "alloc/cuda/cuda_common.h"
#include "common/bounded_json.h"
#include "gpumem/alloc/caching_allocator.h"
#include "gpumem/alloc/config.h"
#include "gpumem/alloc/cuda.h"
#include "gpumem/alloc/planned_allocator.h"
#include "gpumem/alloc/snapshot.h"
#include "gpumem/alloc/stats_publisher.h"

#define GPUMEM_TORCH_API extern "C" __attribute__((visibility("default")))

namespace {

using namespace gpumem::alloc;

constexpr int kMaxDevices = 64;

struct DeviceAllocator {
  std::unique_ptr<CudaDeviceResource> memory;
  std::unique_ptr<CudaVirtualMemory> vmm;
  std::unique_ptr<CudaEvents> events;
  std::unique_ptr<CachingAllocator> allocator;  // planned:false
  std::unique_ptr<PlannedAllocator> planned;    // planned:true
  CachingAllocator* cache = nullptr;            // either's: statistics, snapshots, empty_cache
  std::unique_ptr<StatsPublisher> publisher;    // for `gpumem exporter`; null when off or refused
};

// Made once and never destroyed: PyTorch frees tensors during interpreter
// shutdown, after static destructors would have run, and by then the CUDA
// runtime may be unloading too. The driver reclaims the memory at exit.
std::atomic<DeviceAllocator*> g_devices[kMaxDevices];
std::mutex g_create_mutex;

// Failures are reported on stderr since the C boundary carries no message;
// a loop that probes for the largest batch that fits should not flood it.
constexpr int kMaxReports = 8;
std::atomic<int> g_reports{0};

void report(const char* function, const char* what) noexcept {
  const int n = g_reports.fetch_add(1, std::memory_order_relaxed);
  if (n < kMaxReports) {
    std::fprintf(stderr, "gpumem: %s: %s\n", function, what);
  } else if (n == kMaxReports) {
    std::fprintf(stderr, "gpumem: further failures are not reported\n");
  }
}

// Thrown out of gpumem_torch_alloc on failure (see there). A bad_alloc, as
// RMM's PyTorch allocator throws, carrying gpumem's one-line explanation.
class AllocationFailed final : public std::bad_alloc {
 public:
  explicit AllocationFailed(std::string message) : message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

bool valid_device(int device) { return device >= 0 && device < kMaxDevices; }

// The device's allocator, made on first use. Throws what making it throws
// (no device, a bad GPUMEM_ALLOC_CONF), and the next call tries again.
DeviceAllocator& device_allocator(int device) {
  if (!valid_device(device)) {
    throw DeviceError("device " + std::to_string(device) + " is out of range (gpumem_torch handles devices 0 to " +
                      std::to_string(kMaxDevices - 1) + ")");
  }
  if (DeviceAllocator* existing = g_devices[device].load(std::memory_order_acquire)) return *existing;
  std::lock_guard lock(g_create_mutex);
  if (DeviceAllocator* existing = g_devices[device].load(std::memory_order_acquire)) return *existing;
  // The plugin publishes for `gpumem exporter` unless told
  // publish_interval_ms:0: a training job is what fleets monitor.
  AllocatorConfig defaults = AllocatorConfig::gpumem_defaults();
  defaults.publish_interval_ms = 5;
  const AllocatorConfig config = allocator_config_from_env(defaults);
  auto made = std::make_unique<DeviceAllocator>();
  made->memory = std::make_unique<CudaDeviceResource>(device);
  if (config.expandable_segments) made->vmm = std::make_unique<CudaVirtualMemory>(device);
  made->events = std::make_unique<CudaEvents>(device);
  Upstream upstream;
  upstream.memory = made->memory.get();
  upstream.vmm = made->vmm.get();
  upstream.events = made->events.get();
  upstream.capacity = made->memory->total_memory();
  if (config.planned) {
    made->planned = std::make_unique<PlannedAllocator>(upstream, config, planned_options(config));
    made->cache = &made->planned->cache();
  } else {
    made->allocator = std::make_unique<CachingAllocator>(upstream, config);
    made->cache = made->allocator.get();
  }
  if (config.publish_interval_ms > 0) {
    try {
      made->publisher = std::make_unique<StatsPublisher>(
          *made->cache,
          PublisherOptions{
              .interval = std::chrono::milliseconds(config.publish_interval_ms), .device = device, .name = {}});
    } catch (const std::exception& e) {
      // Monitoring is not worth failing a training step for.
      report("gpumem_torch (publishing statistics)", e.what());
    }
  }
  DeviceAllocator* result = made.release();
  g_devices[device].store(result, std::memory_order_release);
  return *result;
}

// The allocator of a device that has one, else nullptr: queries must not
// create a context on a device the program never used.
CachingAllocator* existing_allocator(int device) {
  if (!valid_device(device)) return nullptr;
  DeviceAllocator* state = g_devices[device].load(std::memory_order_acquire);
  return state != nullptr ? state->cache : nullptr;
}

StreamId to_stream_id(cudaStream_t stream) { return reinterpret_cast<StreamId>(stream); }

// Copies `text` into buf like snprintf: returns its length, writes at most
// len bytes including the terminating NUL.
long copy_out(const std::string& text, char* buf, size_t len) {
  if (buf != nullptr && len > 0) {
    const size_t n = text.size() < len - 1 ? text.size() : len - 1;
    std::memcpy(buf, text.data(), n);
    buf[n] = '\0';
  }
  return static_cast<long>(text.size());
}

}  // namespace

// Allocates `size` bytes on `device` for use on `stream`.
//
// Failure throws a std::bad_alloc whose what() is gpumem's explanation
// (PyTorch turns it into a Python exception with that text). It cannot
// return nullptr instead: PyTorch (2.x) does not check the result of a
// pluggable allocator and would hand out a tensor at address 0. The message
// also goes to stderr, in case the exception is swallowed. Call it only from
// C++ callers that can unwind, as PyTorch does.
GPUMEM_TORCH_API void* gpumem_torch_alloc(ssize_t size, int device, cudaStream_t stream) {
  try {
    if (size < 0) throw DeviceError("negative size " + std::to_string(size));
    DeviceAllocator& d = device_allocator(device);
    const auto bytes = static_cast<std::size_t>(size);
    return d.planned ? d.planned->allocate(bytes, to_stream_id(stream))
                     : d.cache->allocate(bytes, to_stream_id(stream));
  } catch (const std::exception& e) {
    report("gpumem_torch_alloc", e.what());
    throw AllocationFailed(std::string("gpumem_torch_alloc(") + std::to_string(size) + " bytes, device " +
                           std::to_string(device) + "): " + e.what());
  }
}

// Frees what gpumem_torch_alloc returned; `stream` is the allocation's, as
// PyTorch passes it. Never throws: failures go to stderr.
GPUMEM_TORCH_API void gpumem_torch_free(void* ptr, ssize_t /*size*/, int device, cudaStream_t stream) {
  if (ptr == nullptr) return;
  try {
    DeviceAllocator* d = valid_device(device) ? g_devices[device].load(std::memory_order_acquire) : nullptr;
    const FreeStatus status = d == nullptr ? FreeStatus::kUnknownPointer
                              : d->planned ? d->planned->free(ptr, to_stream_id(stream))
                                           : d->cache->free(ptr, to_stream_id(stream));
    if (status != FreeStatus::kOk) {
      const std::string what = "pointer " + gpumem::alloc::cuda_detail::hex(ptr) +
                               " was not allocated by gpumem on device " + std::to_string(device);
      report("gpumem_torch_free", what.c_str());
    }
  } catch (const std::exception& e) {
    report("gpumem_torch_free", e.what());
  } catch (...) {
    report("gpumem_torch_free", "unknown exception");
  }
}

// Marks `ptr` as used on `stream` too (Tensor.record_stream). For C++
// callers that install it with CUDAPluggableAllocator::set_record_stream_fn;
// PyTorch's Python API cannot. Returns 0, or -1 when no device knows ptr.
GPUMEM_TORCH_API int gpumem_torch_record_stream(void* ptr, cudaStream_t stream) {
  try {
    for (int device = 0; device < kMaxDevices; ++device) {
      CachingAllocator* allocator = existing_allocator(device);
      if (allocator != nullptr && allocator->record_stream(ptr, to_stream_id(stream)) == FreeStatus::kOk) return 0;
    }
  } catch (const std::exception& e) {
    report("gpumem_torch_record_stream", e.what());
  }
  return -1;
}

// An iteration (a training step) begins on every device gpumem serves: with
// GPUMEM_ALLOC_CONF=planned:true the first is recorded and the next ones
// are served from a planned arena (docs/allocator.md, "Planned mode"); call
// it from the training loop (ctypes) before each step. Otherwise nothing.
GPUMEM_TORCH_API void gpumem_torch_step(void) {
  for (int device = 0; device < kMaxDevices; ++device) {
    try {
      DeviceAllocator* d = g_devices[device].load(std::memory_order_acquire);
      if (d != nullptr && d->planned) d->planned->step();
    } catch (const std::exception& e) {
      report("gpumem_torch_step", e.what());
    }
  }
}

// Gives cached memory back to the driver on every device gpumem serves
// (torch.cuda.empty_cache() does not reach a pluggable allocator).
GPUMEM_TORCH_API void gpumem_torch_empty_cache(void) {
  for (int device = 0; device < kMaxDevices; ++device) {
    try {
      if (CachingAllocator* allocator = existing_allocator(device)) allocator->empty_cache();
    } catch (const std::exception& e) {
      report("gpumem_torch_empty_cache", e.what());
    }
  }
}

// torch.cuda.memory_stats()-style flat JSON object for `device` ({} before
// its first allocation). snprintf-like: returns the JSON's length and writes
// at most len bytes with the NUL, so a call with (nullptr, 0) sizes the
// buffer. -1 on failure.
GPUMEM_TORCH_API long gpumem_torch_memory_stats_json(int device, char* buf, size_t len) {
  try {
    nlohmann::json json = nlohmann::json::object();
    if (CachingAllocator* allocator = existing_allocator(device)) {
      for (const auto& [key, value] : allocator->stats().flatten()) json[key] = value;
    }
    return copy_out(gpumem::json_text(json), buf, len);
  } catch (const std::exception& e) {
    report("gpumem_torch_memory_stats_json", e.what());
    return -1;
  }
}

// The segments and blocks of `device` as JSON (gpumem's snapshot format),
// sized and returned as gpumem_torch_memory_stats_json does.
GPUMEM_TORCH_API long gpumem_torch_memory_snapshot_json(int device, char* buf, size_t len) {
  try {
    CachingAllocator* allocator = existing_allocator(device);
    const nlohmann::json json = to_json(allocator != nullptr ? allocator->snapshot() : Snapshot{});
    return copy_out(gpumem::json_text(json), buf, len);
  } catch (const std::exception& e) {
    report("gpumem_torch_memory_snapshot_json", e.what());
    return -1;
  }
}

// A torch.cuda.memory_summary()-style table for `device`. The text stays
// valid until the calling thread's next call; nullptr on failure.
GPUMEM_TORCH_API const char* gpumem_torch_memory_summary(int device) {
  try {
    thread_local std::string text;
    CachingAllocator* allocator = existing_allocator(device);
    text = allocator != nullptr ? allocator->memory_summary()
                                : "gpumem: no allocation on device " + std::to_string(device) + " yet\n";
    return text.c_str();
  } catch (const std::exception& e) {
    report("gpumem_torch_memory_summary", e.what());
    return nullptr;
  }
}

// Resets the peaks of `device`'s statistics (torch.cuda.reset_peak_memory_stats).
GPUMEM_TORCH_API void gpumem_torch_reset_peak_stats(int device) {
  try {
    if (CachingAllocator* allocator = existing_allocator(device)) allocator->reset_peak_stats();
  } catch (const std::exception& e) {
    report("gpumem_torch_reset_peak_stats", e.what());
  }
}

// The configuration in force, as GPUMEM_ALLOC_CONF reads it back; nullptr
// with the reason on stderr when GPUMEM_ALLOC_CONF is malformed.
GPUMEM_TORCH_API const char* gpumem_torch_config(void) {
  try {
    thread_local std::string text;
    text = to_string(allocator_config_from_env());
    return text.c_str();
  } catch (const std::exception& e) {
    report("gpumem_torch_config", e.what());
    return nullptr;
  }
}
