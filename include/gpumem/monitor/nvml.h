#pragma once
// NVML, loaded at run time with dlopen("libnvidia-ml.so.1"): the exporter
// links against nothing of NVIDIA's, so the same binary runs on a host
// without a driver (and says so) and on a GPU node.
#include <memory>
#include <string>

#include "gpumem/monitor/gpu_memory.h"

namespace gpumem::monitor {

class NvmlSource final : public GpuMemorySource {
 public:
  // NVML initialized, or nullptr with the reason ("libnvidia-ml.so.1: cannot
  // open shared object file", "nvmlInit_v2: Driver Not Loaded") in *reason.
  static std::unique_ptr<NvmlSource> open(std::string* reason);
  ~NvmlSource() override;  // nvmlShutdown, dlclose
  NvmlSource(const NvmlSource&) = delete;
  NvmlSource& operator=(const NvmlSource&) = delete;

  std::vector<GpuMemory> read() override;

 private:
  struct Api;
  explicit NvmlSource(std::unique_ptr<Api> api);
  std::unique_ptr<Api> api_;
};

}  // namespace gpumem::monitor
