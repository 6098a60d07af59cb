// NVML through dlopen. The declarations below are NVML's C ABI as NVIDIA
// documents it (nvml.h, "NVML API Reference"); the header itself is not
// needed, so the exporter builds where the driver's development files are
// absent.
#include "gpumem/monitor/nvml.h"

#include <dlfcn.h>

#include <stdexcept>
#include <utility>

#include <fmt/format.h>

namespace gpumem::monitor {
namespace {

using NvmlReturn = int;  // nvmlReturn_t
using NvmlDevice = struct NvmlDeviceOpaque*;
constexpr NvmlReturn kSuccess = 0;
constexpr NvmlReturn kInsufficientSize = 7;
constexpr unsigned kStringBuffer = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE, NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned long long kValueNotAvailable = ~0ULL;  // NVML_VALUE_NOT_AVAILABLE
// More processes on one GPU than this is not a real answer: stop asking.
constexpr unsigned kMaxProcesses = 4096;

struct NvmlMemory {  // nvmlMemory_t (v1)
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct NvmlProcessInfo {  // nvmlProcessInfo_v2_t, also what _v3 fills
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

}  // namespace

struct NvmlSource::Api {
  void* library = nullptr;
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  NvmlReturn (*device_count)(unsigned*) = nullptr;
  NvmlReturn (*device_by_index)(unsigned, NvmlDevice*) = nullptr;
  NvmlReturn (*memory_info)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*uuid)(NvmlDevice, char*, unsigned) = nullptr;
  NvmlReturn (*name)(NvmlDevice, char*, unsigned) = nullptr;
  NvmlReturn (*minor_number)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*compute_processes)(NvmlDevice, unsigned*, NvmlProcessInfo*) = nullptr;

  std::string error(const char* function, NvmlReturn status) const {
    const char* text = error_string ? error_string(status) : nullptr;
    return fmt::format("{}: {}", function, text ? text : fmt::format("NVML error {}", status));
  }
  void check(const char* function, NvmlReturn status) const {
    if (status != kSuccess) throw std::runtime_error(error(function, status));
  }
};

namespace {

template <class Function>
bool bind(void* library, const char* symbol, Function& out) {
  out = reinterpret_cast<Function>(dlsym(library, symbol));
  return out != nullptr;
}

std::string text_of(NvmlReturn (*get)(NvmlDevice, char*, unsigned), NvmlDevice device) {
  char buffer[kStringBuffer] = {};
  if (get(device, buffer, kStringBuffer) != kSuccess) return "";
  buffer[kStringBuffer - 1] = '\0';
  return buffer;
}

}  // namespace

std::unique_ptr<NvmlSource> NvmlSource::open(std::string* reason) {
  auto api = std::make_unique<Api>();
  api->library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!api->library) {
    if (reason) *reason = dlerror();
    return nullptr;
  }
  bool bound = bind(api->library, "nvmlInit_v2", api->init) && bind(api->library, "nvmlShutdown", api->shutdown) &&
               bind(api->library, "nvmlErrorString", api->error_string) &&
               bind(api->library, "nvmlDeviceGetCount_v2", api->device_count) &&
               bind(api->library, "nvmlDeviceGetHandleByIndex_v2", api->device_by_index) &&
               bind(api->library, "nvmlDeviceGetMemoryInfo", api->memory_info) &&
               bind(api->library, "nvmlDeviceGetUUID", api->uuid) &&
               bind(api->library, "nvmlDeviceGetName", api->name) &&
               bind(api->library, "nvmlDeviceGetMinorNumber", api->minor_number);
  // _v3 since driver 510; _v2 before it. Both fill the same struct.
  bound = bound && (bind(api->library, "nvmlDeviceGetComputeRunningProcesses_v3", api->compute_processes) ||
                    bind(api->library, "nvmlDeviceGetComputeRunningProcesses_v2", api->compute_processes));
  if (!bound) {
    if (reason) *reason = "libnvidia-ml.so.1: a function gpumem needs is missing (driver older than R450?)";
    dlclose(api->library);
    return nullptr;
  }
  if (const NvmlReturn status = api->init(); status != kSuccess) {
    if (reason) *reason = api->error("nvmlInit_v2", status);
    dlclose(api->library);
    return nullptr;
  }
  return std::unique_ptr<NvmlSource>(new NvmlSource(std::move(api)));
}

NvmlSource::NvmlSource(std::unique_ptr<Api> api) : api_(std::move(api)) {}

NvmlSource::~NvmlSource() {
  api_->shutdown();
  dlclose(api_->library);
}

std::vector<GpuMemory> NvmlSource::read() {
  unsigned count = 0;
  api_->check("nvmlDeviceGetCount_v2", api_->device_count(&count));
  std::vector<GpuMemory> gpus;
  gpus.reserve(count);
  for (unsigned index = 0; index < count; ++index) {
    NvmlDevice device = nullptr;
    api_->check("nvmlDeviceGetHandleByIndex_v2", api_->device_by_index(index, &device));
    GpuMemory gpu;
    gpu.index = index;
    if (api_->minor_number(device, &gpu.minor) != kSuccess) gpu.minor = index;
    gpu.uuid = text_of(api_->uuid, device);
    gpu.model = text_of(api_->name, device);
    NvmlMemory memory{};
    api_->check("nvmlDeviceGetMemoryInfo", api_->memory_info(device, &memory));
    gpu.total_bytes = memory.total;
    gpu.used_bytes = memory.used;
    gpu.free_bytes = memory.free;

    std::vector<NvmlProcessInfo> processes(16);
    for (int attempt = 0; attempt < 4; ++attempt) {
      unsigned listed = static_cast<unsigned>(processes.size());
      const NvmlReturn status = api_->compute_processes(device, &listed, processes.data());
      if (status == kInsufficientSize && listed <= kMaxProcesses) {
        processes.resize(listed + 8);  // room for processes that start meanwhile
        continue;
      }
      if (status != kSuccess) break;  // per-process figures are optional; the GPU's stand
      for (unsigned i = 0; i < listed && i < processes.size(); ++i) {
        if (processes[i].usedGpuMemory == kValueNotAvailable) continue;
        gpu.processes.push_back({processes[i].pid, processes[i].usedGpuMemory});
      }
      break;
    }
    gpus.push_back(std::move(gpu));
  }
  return gpus;
}

}  // namespace gpumem::monitor
