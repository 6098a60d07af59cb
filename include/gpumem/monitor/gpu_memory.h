#pragma once
// Device memory as the driver sees it: what NVML reports per GPU and per
// process. Sources are swappable so that the exporter, its tests and its
// benchmark run the same code with NVML, a simulated GPU or fixed figures.
#include <cstdint>
#include <string>
#include <vector>

namespace gpumem::monitor {

struct ProcessGpuMemory {
  std::uint32_t pid = 0;
  std::uint64_t used_bytes = 0;
};

struct GpuMemory {
  unsigned index = 0;  // NVML's index (nvidia-smi's), the "gpu" label
  unsigned minor = 0;  // /dev/nvidia<minor>, dcgm-exporter's "device" label
  std::string uuid;    // "GPU-..." (dcgm-exporter's "UUID" label)
  std::string model;   // "NVIDIA H200" (dcgm-exporter's "modelName")
  std::uint64_t total_bytes = 0;
  std::uint64_t used_bytes = 0;
  std::uint64_t free_bytes = 0;
  // Compute processes with memory on this GPU; a process whose usage the
  // driver does not report (containers without the host's pid namespace)
  // is left out.
  std::vector<ProcessGpuMemory> processes;
};

class GpuMemorySource {
 public:
  virtual ~GpuMemorySource() = default;
  // Every GPU, by index. Throws std::runtime_error when the figures cannot
  // be read now (the exporter reports the source down and retries).
  virtual std::vector<GpuMemory> read() = 0;
};

}  // namespace gpumem::monitor
