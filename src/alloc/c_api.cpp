// The C API (include/gpumem/gpumem.h): handles over the C++ allocator, and
// exceptions turned into status codes with a thread-local message.
#include "common/bounded_json.h"
#include "gpumem/gpumem.h"

#include <chrono>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpumem/alloc/caching_allocator.h"
#include "gpumem/alloc/config.h"
#include "gpumem/alloc/cuda.h"
#include "gpumem/alloc/planned_allocator.h"
#include "gpumem/alloc/simulated_device.h"
#include "gpumem/alloc/stats_publisher.h"
#include "gpumem/common/error.h"
#include "gpumem/common/files.h"

namespace {

using gpumem::InputError;
using gpumem::alloc::CachingAllocator;
using gpumem::alloc::FreeStatus;

// Owns whichever backend objects the device is made of. Shared, so that an
// allocator keeps its device alive however the C caller orders destroys.
struct DeviceState {
  std::unique_ptr<gpumem::alloc::SimulatedDevice> simulated;
  std::unique_ptr<gpumem::alloc::CudaDeviceResource> cuda_memory;
  std::unique_ptr<gpumem::alloc::CudaVirtualMemory> cuda_vmm;
  std::unique_ptr<gpumem::alloc::CudaEvents> cuda_events;
  gpumem::alloc::Upstream upstream;
  int index = 0;  // the CUDA ordinal, or 0 for a simulated device: where statistics are published
};

}  // namespace

struct gpumem_device {
  std::shared_ptr<DeviceState> state;
};

struct gpumem_allocator {
  std::shared_ptr<DeviceState> device;                       // declared first: destroyed after the allocator
  std::unique_ptr<CachingAllocator> allocator;               // planned:false
  std::unique_ptr<gpumem::alloc::PlannedAllocator> planned;  // planned:true
  CachingAllocator* cache = nullptr;                         // either's: statistics, snapshots
  std::unique_ptr<gpumem::alloc::StatsPublisher> publisher;  // declared last: stops before the allocator goes
};

namespace {

thread_local std::string t_last_error;

// A pointer the allocator does not know: its own status, not a bad argument.
class InvalidPointerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

gpumem_status fail(gpumem_status status, const char* function, const char* what) noexcept {
  try {
    t_last_error = fmt::format("{}: {}", function, what);
  } catch (...) {
    // No memory even for the message: an empty one beats terminating.
    t_last_error.clear();
  }
  return status;
}

// Runs one entry point's body, mapping every exception to its status.
template <class Body>
gpumem_status guarded(const char* function, Body&& body) noexcept {
  try {
    body();
    return GPUMEM_OK;
  } catch (const InvalidPointerError& e) {
    return fail(GPUMEM_ERROR_INVALID_POINTER, function, e.what());
  } catch (const gpumem::alloc::OutOfMemoryError& e) {
    return fail(GPUMEM_ERROR_OUT_OF_MEMORY, function, e.what());
  } catch (const InputError& e) {
    return fail(GPUMEM_ERROR_INVALID_ARGUMENT, function, e.what());
  } catch (const gpumem::alloc::DeviceError& e) {
    return fail(GPUMEM_ERROR_DEVICE, function, e.what());
  } catch (const std::bad_alloc&) {
    return fail(GPUMEM_ERROR_INTERNAL, function, "out of host memory");
  } catch (const std::exception& e) {
    return fail(GPUMEM_ERROR_INTERNAL, function, e.what());
  } catch (...) {
    return fail(GPUMEM_ERROR_INTERNAL, function, "unknown exception");
  }
}

void require(const void* argument, const char* name) {
  if (argument == nullptr) throw InputError(fmt::format("{} is NULL", name));
}

// The caching allocator behind a handle: the allocator itself, or the
// cache behind a planned one (statistics, snapshots, history).
CachingAllocator& allocator_of(gpumem_allocator* allocator) {
  require(allocator, "allocator");
  return *allocator->cache;
}

DeviceState& device_of(gpumem_device* device) {
  require(device, "device");
  return *device->state;
}

gpumem::alloc::SimulatedDevice& simulated_of(gpumem_device* device) {
  DeviceState& state = device_of(device);
  if (!state.simulated) throw InputError("not a simulated device");
  return *state.simulated;
}

void check_status(FreeStatus status, void* ptr) {
  if (status == FreeStatus::kOk) return;
  throw InvalidPointerError(fmt::format("{} was not allocated by this allocator, or was freed already", ptr));
}

// snprintf's convention, so C callers can ask for the size, then fill.
void copy_out(const std::string& text, char* buffer, std::size_t size, std::size_t* needed) {
  if (size > 0) {
    const std::size_t n = text.size() < size ? text.size() : size - 1;
    std::memcpy(buffer, text.data(), n);
    buffer[n] = '\0';
  }
  if (needed != nullptr) *needed = text.size() + 1;
}

void check_buffer(const char* buffer, std::size_t size) {
  if (buffer == nullptr && size > 0) throw InputError("buffer is NULL but size is not 0");
}

// Planned mode's counts, all 0 for an allocator that is not planned.
gpumem::alloc::PlannedStats planned_stats_of(gpumem_allocator* allocator) {
  allocator_of(allocator);
  return allocator->planned ? allocator->planned->planned_stats() : gpumem::alloc::PlannedStats{};
}

}  // namespace

extern "C" {

const char* gpumem_last_error(void) { return t_last_error.c_str(); }

const char* gpumem_status_name(gpumem_status status) {
  // Through int: a C caller can pass any value, not only the enumerators.
  switch (static_cast<int>(status)) {
    case GPUMEM_OK: return "GPUMEM_OK";
    case GPUMEM_ERROR_OUT_OF_MEMORY: return "GPUMEM_ERROR_OUT_OF_MEMORY";
    case GPUMEM_ERROR_INVALID_ARGUMENT: return "GPUMEM_ERROR_INVALID_ARGUMENT";
    case GPUMEM_ERROR_INVALID_POINTER: return "GPUMEM_ERROR_INVALID_POINTER";
    case GPUMEM_ERROR_DEVICE: return "GPUMEM_ERROR_DEVICE";
    case GPUMEM_ERROR_INTERNAL: return "GPUMEM_ERROR_INTERNAL";
    default: return "GPUMEM_STATUS_UNKNOWN";
  }
}

gpumem_status gpumem_simulated_device_create(size_t capacity_bytes, size_t granularity_bytes, gpumem_device** out) {
  return guarded(__func__, [&] {
    require(out, "out");
    if (capacity_bytes == 0) throw InputError("capacity_bytes is 0");
    gpumem::alloc::SimulatedDeviceOptions options;
    options.capacity = capacity_bytes;
    if (granularity_bytes != 0) options.granularity = granularity_bytes;
    auto state = std::make_shared<DeviceState>();
    try {
      state->simulated = std::make_unique<gpumem::alloc::SimulatedDevice>(options);
    } catch (const gpumem::alloc::DeviceError& e) {
      // The simulated device refuses only its options: the caller's mistake.
      throw InputError(e.what());
    }
    gpumem::alloc::SimulatedDevice* sim = state->simulated.get();
    state->upstream = {sim, sim, sim, 0};
    *out = new gpumem_device{std::move(state)};
  });
}

gpumem_status gpumem_cuda_device_create(int device, gpumem_device** out) {
  return guarded(__func__, [&] {
    require(out, "out");
    if (device < -1) throw InputError(fmt::format("device {} is not a device number (-1: the current one)", device));
    auto state = std::make_shared<DeviceState>();
    state->cuda_memory = std::make_unique<gpumem::alloc::CudaDeviceResource>(device);
    state->cuda_vmm = std::make_unique<gpumem::alloc::CudaVirtualMemory>(device);
    state->cuda_events = std::make_unique<gpumem::alloc::CudaEvents>(device);
    state->upstream = {state->cuda_memory.get(), state->cuda_vmm.get(), state->cuda_events.get(),
                       state->cuda_memory->total_memory()};
    state->index = state->cuda_memory->device();
    *out = new gpumem_device{std::move(state)};
  });
}

gpumem_status gpumem_device_destroy(gpumem_device* device) {
  return guarded(__func__, [&] { delete device; });
}

gpumem_status gpumem_simulated_launch(gpumem_device* device, uint64_t stream) {
  return guarded(__func__, [&] { simulated_of(device).launch(stream); });
}

gpumem_status gpumem_simulated_complete(gpumem_device* device, uint64_t stream) {
  return guarded(__func__, [&] { simulated_of(device).complete(stream); });
}

gpumem_status gpumem_allocator_create(gpumem_device* device, const char* config, gpumem_allocator** out) {
  return guarded(__func__, [&] {
    require(out, "out");
    DeviceState& state = device_of(device);
    gpumem::alloc::AllocatorConfig parsed =
        config != nullptr ? gpumem::alloc::parse_allocator_config(config) : gpumem::alloc::allocator_config_from_env();
    auto allocator = std::make_unique<gpumem_allocator>();
    allocator->device = device->state;
    if (parsed.planned) {
      allocator->planned = std::make_unique<gpumem::alloc::PlannedAllocator>(state.upstream, parsed,
                                                                             gpumem::alloc::planned_options(parsed));
      allocator->cache = &allocator->planned->cache();
    } else {
      allocator->allocator = std::make_unique<CachingAllocator>(state.upstream, parsed);
      allocator->cache = allocator->allocator.get();
    }
    if (parsed.publish_interval_ms > 0) {
      try {
        allocator->publisher = std::make_unique<gpumem::alloc::StatsPublisher>(
            *allocator->cache,
            gpumem::alloc::PublisherOptions{
                .interval = std::chrono::milliseconds(parsed.publish_interval_ms), .device = state.index, .name = {}});
      } catch (const std::system_error& e) {
        throw InputError(
            fmt::format("publish_interval_ms: cannot publish device {}'s statistics ({}); one "
                        "allocator per device and process publishes",
                        state.index, e.what()));
      }
    }
    *out = allocator.release();
  });
}

gpumem_status gpumem_allocator_destroy(gpumem_allocator* allocator) {
  return guarded(__func__, [&] { delete allocator; });
}

gpumem_status gpumem_malloc(gpumem_allocator* allocator, size_t bytes, uint64_t stream, void** out) {
  return guarded(__func__, [&] {
    CachingAllocator& a = allocator_of(allocator);
    require(out, "out");
    *out = allocator->planned ? allocator->planned->allocate(bytes, stream) : a.allocate(bytes, stream);
  });
}

gpumem_status gpumem_malloc_tagged(gpumem_allocator* allocator, size_t bytes, uint64_t stream, const char* tag,
                                   void** out) {
  return guarded(__func__, [&] {
    CachingAllocator& a = allocator_of(allocator);
    require(out, "out");
    const gpumem::alloc::TagId id = tag != nullptr ? a.intern_tag(tag) : gpumem::alloc::kNoTag;
    // A planned allocator serves requests by size and order; tags name the
    // cache's blocks only.
    *out = allocator->planned ? allocator->planned->allocate(bytes, stream) : a.allocate_tagged(bytes, stream, id);
  });
}

gpumem_status gpumem_free(gpumem_allocator* allocator, void* ptr, uint64_t stream) {
  return guarded(__func__, [&] {
    CachingAllocator& a = allocator_of(allocator);
    if (ptr != nullptr)
      check_status(allocator->planned ? allocator->planned->free(ptr, stream) : a.free(ptr, stream), ptr);
  });
}

gpumem_status gpumem_record_stream(gpumem_allocator* allocator, void* ptr, uint64_t stream) {
  return guarded(__func__, [&] {
    CachingAllocator& a = allocator_of(allocator);
    require(ptr, "ptr");
    check_status(a.record_stream(ptr, stream), ptr);
  });
}

gpumem_status gpumem_step(gpumem_allocator* allocator) {
  return guarded(__func__, [&] {
    allocator_of(allocator);  // checks the handle
    if (allocator->planned) allocator->planned->step();
  });
}

gpumem_status gpumem_use_plan_file(gpumem_allocator* allocator, const char* path) {
  return guarded(__func__, [&] {
    allocator_of(allocator);
    require(path, "path");
    if (!allocator->planned) throw InputError("the allocator is not planned: create it with \"planned:true\"");
    // A plan holds 2^22 requests at most: under 128 MiB of JSON.
    bool gzipped = false;
    const std::string text =
        gpumem::read_file(path, std::uint64_t{1} << 27, "the most gpumem reads from a plan", &gzipped);
    allocator->planned->use_plan(gpumem::alloc::iteration_plan_from_json(text, path));
  });
}

gpumem_status gpumem_planned_stats(gpumem_allocator* allocator, uint64_t* planned, uint64_t* missed,
                                   size_t* arena_bytes) {
  return guarded(__func__, [&] {
    const gpumem::alloc::PlannedStats s = planned_stats_of(allocator);
    if (planned) *planned = s.planned;
    if (missed) *missed = s.missed;
    if (arena_bytes) *arena_bytes = s.arena_bytes;
  });
}

gpumem_status gpumem_planned_device_bytes(gpumem_allocator* allocator, size_t* bytes) {
  return guarded(__func__, [&] {
    require(bytes, "bytes");
    *bytes = planned_stats_of(allocator).device_bytes;
  });
}

gpumem_status gpumem_planned_shapes(gpumem_allocator* allocator, uint64_t* recordings, uint64_t* shape_switches,
                                    size_t* shapes) {
  return guarded(__func__, [&] {
    const gpumem::alloc::PlannedStats s = planned_stats_of(allocator);
    if (recordings) *recordings = s.recordings;
    if (shape_switches) *shape_switches = s.shape_switches;
    if (shapes) *shapes = s.shapes;
  });
}

gpumem_status gpumem_empty_cache(gpumem_allocator* allocator) {
  return guarded(__func__, [&] { allocator_of(allocator).empty_cache(); });
}

gpumem_status gpumem_reset_peak_stats(gpumem_allocator* allocator) {
  return guarded(__func__, [&] { allocator_of(allocator).reset_peak_stats(); });
}

gpumem_status gpumem_get_stat(gpumem_allocator* allocator, const char* key, int64_t* out) {
  return guarded(__func__, [&] {
    CachingAllocator& a = allocator_of(allocator);
    require(key, "key");
    require(out, "out");
    const auto stats = a.stats().flatten();
    const auto it = stats.find(key);
    if (it == stats.end())
      throw InputError(
          fmt::format("unknown statistic '{}' (names as torch.cuda.memory_stats(), e.g. "
                      "allocated_bytes.all.current)",
                      gpumem::printable(key)));
    *out = it->second;
  });
}

gpumem_status gpumem_memory_summary(gpumem_allocator* allocator, char* buffer, size_t size, size_t* needed) {
  return guarded(__func__, [&] {
    CachingAllocator& a = allocator_of(allocator);
    check_buffer(buffer, size);
    copy_out(a.memory_summary(), buffer, size, needed);
  });
}

gpumem_status gpumem_snapshot_json(gpumem_allocator* allocator, char* buffer, size_t size, size_t* needed) {
  return guarded(__func__, [&] {
    CachingAllocator& a = allocator_of(allocator);
    check_buffer(buffer, size);
    copy_out(gpumem::json_text(gpumem::alloc::to_json(a.snapshot())), buffer, size, needed);
  });
}

gpumem_status gpumem_write_history(gpumem_allocator* allocator, const char* path) {
  return guarded(__func__, [&] {
    CachingAllocator& a = allocator_of(allocator);
    require(path, "path");
    std::ostringstream text;
    a.write_history(text);
    gpumem::write_file_atomically(path, text.str());
  });
}

}  // extern "C"
