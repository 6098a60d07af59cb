#pragma once
// What the exporter knows at one moment, and the same as Prometheus metric
// families. The names and labels are documented in docs/exporter.md; device
// figures also go out under dcgm-exporter's names and labels, so dashboards
// made for dcgm-exporter keep working.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <prometheus/metric_family.h>

#include "gpumem/alloc/stats_publisher.h"
#include "gpumem/monitor/gpu_memory.h"

namespace gpumem::monitor {

struct MonitorSnapshot {
  std::string hostname;
  bool gpus_up = false;  // the GPU source answered
  std::vector<GpuMemory> gpus;
  std::vector<alloc::PublishedBlock> allocators;
  std::map<std::uint64_t, std::string> process_names;  // pid -> /proc/<pid>/comm
  double collect_seconds = 0;                          // how long taking this snapshot took
  std::uint64_t rejected_blocks = 0;                   // blocks refused since the exporter started
};

struct MetricsOptions {
  // Also write DCGM_FI_DEV_FB_USED and DCGM_FI_DEV_FB_FREE (MiB, as
  // dcgm-exporter does). Off where dcgm-exporter runs beside gpumem.
  bool dcgm_names = true;
};

std::vector<prometheus::MetricFamily> to_metric_families(const MonitorSnapshot& snapshot,
                                                         const MetricsOptions& options = {});

// Prometheus' text exposition format (version 0.0.4).
std::string to_text(const std::vector<prometheus::MetricFamily>& families);

}  // namespace gpumem::monitor
