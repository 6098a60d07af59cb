// Snapshot -> metric families. One table lists every allocator metric with
// the field it reads, so the names, the help and docs/exporter.md stay in
// one place each.
#include "gpumem/monitor/metrics.h"

#include <prometheus/text_serializer.h>

#include <string>
#include <utility>

namespace gpumem::monitor {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<ClientMetric::Label>;

MetricFamily family(std::string name, std::string help, MetricType type) {
  MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

void add(MetricFamily& f, Labels labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  if (f.type == MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(std::move(m));
}

// dcgm-exporter's labels for one GPU, in its order, but its camelCase
// modelName: Prometheus' linter asks for snake_case, so the model goes to
// gpumem_gpu_info instead.
Labels gpu_labels(const GpuMemory& gpu, const std::string& hostname) {
  return {{"gpu", std::to_string(gpu.index)},
          {"UUID", gpu.uuid},
          {"device", "nvidia" + std::to_string(gpu.minor)},
          {"Hostname", hostname}};
}

std::string process_name(const MonitorSnapshot& snapshot, std::uint64_t pid) {
  const auto it = snapshot.process_names.find(pid);
  return it == snapshot.process_names.end() ? "" : it->second;
}

struct AllocatorMetric {
  const char* name;
  const char* help;
  MetricType type;
  double (*value)(const alloc::PublishedStats&);
};

double as_double(std::uint64_t v) { return static_cast<double>(v); }

// Every figure a published block carries, as gpumem_allocator_* metrics.
const AllocatorMetric kAllocatorMetrics[] = {
    {"gpumem_allocator_allocated_bytes", "Bytes in blocks handed to the caller (rounded sizes).", MetricType::Gauge,
     [](const alloc::PublishedStats& s) { return as_double(s.allocated_bytes); }},
    {"gpumem_allocator_allocated_peak_bytes",
     "Most bytes allocated at once since the allocator began or its peaks were reset.", MetricType::Gauge,
     [](const alloc::PublishedStats& s) { return as_double(s.allocated_bytes_peak); }},
    {"gpumem_allocator_requested_bytes", "Bytes the caller asked for, before rounding.", MetricType::Gauge,
     [](const alloc::PublishedStats& s) { return as_double(s.requested_bytes); }},
    {"gpumem_allocator_active_bytes",
     "Bytes in blocks not yet reusable (allocated, or freed but awaiting another stream).", MetricType::Gauge,
     [](const alloc::PublishedStats& s) { return as_double(s.active_bytes); }},
    {"gpumem_allocator_reserved_bytes", "Bytes the allocator holds from the device (its segments).", MetricType::Gauge,
     [](const alloc::PublishedStats& s) { return as_double(s.reserved_bytes); }},
    {"gpumem_allocator_reserved_peak_bytes", "Most bytes reserved at once.", MetricType::Gauge,
     [](const alloc::PublishedStats& s) { return as_double(s.reserved_bytes_peak); }},
    {"gpumem_allocator_cached_free_bytes", "Bytes in free cached blocks: reserved and reusable without a device call.",
     MetricType::Gauge, [](const alloc::PublishedStats& s) { return as_double(s.cached_free_bytes); }},
    {"gpumem_allocator_largest_free_block_bytes", "The largest request the cache could serve without a device call.",
     MetricType::Gauge, [](const alloc::PublishedStats& s) { return as_double(s.largest_free_block); }},
    {"gpumem_allocator_fragmentation_ratio", "1 - largest free block / cached free bytes (0 when nothing is free).",
     MetricType::Gauge, [](const alloc::PublishedStats& s) { return as_double(s.fragmentation_ppm) / 1e6; }},
    {"gpumem_allocator_live_allocations", "Allocations not yet freed.", MetricType::Gauge,
     [](const alloc::PublishedStats& s) { return as_double(s.allocations); }},
    {"gpumem_allocator_segments", "Segments (device allocations or expandable ranges) held.", MetricType::Gauge,
     [](const alloc::PublishedStats& s) { return as_double(s.segments); }},
    {"gpumem_allocator_capacity_bytes", "The device memory the allocator may use (its limit or the device's size).",
     MetricType::Gauge, [](const alloc::PublishedStats& s) { return as_double(s.capacity); }},
    {"gpumem_allocator_device_allocs_total", "Calls to the device to reserve memory (cudaMalloc or mapping).",
     MetricType::Counter, [](const alloc::PublishedStats& s) { return as_double(s.device_allocs); }},
    {"gpumem_allocator_device_frees_total", "Calls to the device to give memory back.", MetricType::Counter,
     [](const alloc::PublishedStats& s) { return as_double(s.device_frees); }},
    {"gpumem_allocator_alloc_retries_total",
     "Allocations that failed once and succeeded after the cache was emptied (a slow path: PyTorch's "
     "num_alloc_retries).",
     MetricType::Counter, [](const alloc::PublishedStats& s) { return as_double(s.alloc_retries); }},
    {"gpumem_allocator_ooms_total", "Allocations that failed with out of memory.", MetricType::Counter,
     [](const alloc::PublishedStats& s) { return as_double(s.ooms); }},
    {"gpumem_allocator_start_timestamp_seconds", "When the process began publishing, seconds since the Unix epoch.",
     MetricType::Gauge, [](const alloc::PublishedStats& s) { return as_double(s.start_time_ns) / 1e9; }},
    {"gpumem_allocator_update_timestamp_seconds", "When these figures were taken, seconds since the Unix epoch.",
     MetricType::Gauge, [](const alloc::PublishedStats& s) { return as_double(s.update_time_ns) / 1e9; }},
};

void add_gpu_families(const MonitorSnapshot& snapshot, const MetricsOptions& options, std::vector<MetricFamily>& out) {
  MetricFamily total =
      family("gpumem_gpu_memory_total_bytes", "Device memory in all, as NVML reports it.", MetricType::Gauge);
  MetricFamily used = family("gpumem_gpu_memory_used_bytes", "Device memory in use by every process and the driver.",
                             MetricType::Gauge);
  MetricFamily free = family("gpumem_gpu_memory_free_bytes", "Device memory no one holds.", MetricType::Gauge);
  MetricFamily process =
      family("gpumem_gpu_process_memory_bytes",
             "Device memory one compute process holds on one GPU, as NVML reports it.", MetricType::Gauge);
  MetricFamily info =
      family("gpumem_gpu_info", "One series per GPU, with its model name; the value is 1.", MetricType::Gauge);
  MetricFamily dcgm_used = family("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", MetricType::Gauge);
  MetricFamily dcgm_free = family("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", MetricType::Gauge);
  for (const GpuMemory& gpu : snapshot.gpus) {
    const Labels labels = gpu_labels(gpu, snapshot.hostname);
    Labels with_model = labels;
    with_model.push_back({"model_name", gpu.model});
    add(info, with_model, 1);
    add(total, labels, as_double(gpu.total_bytes));
    add(used, labels, as_double(gpu.used_bytes));
    add(free, labels, as_double(gpu.free_bytes));
    // dcgm-exporter reports whole MiB.
    add(dcgm_used, labels, static_cast<double>(gpu.used_bytes / (1u << 20)));
    add(dcgm_free, labels, static_cast<double>(gpu.free_bytes / (1u << 20)));
    for (const ProcessGpuMemory& p : gpu.processes) {
      add(process,
          {{"gpu", std::to_string(gpu.index)},
           {"UUID", gpu.uuid},
           {"Hostname", snapshot.hostname},
           {"pid", std::to_string(p.pid)},
           {"process", process_name(snapshot, p.pid)}},
          as_double(p.used_bytes));
    }
  }
  if (snapshot.gpus.empty()) return;
  if (options.dcgm_names) {
    out.push_back(std::move(dcgm_used));
    out.push_back(std::move(dcgm_free));
  }
  out.push_back(std::move(info));
  out.push_back(std::move(total));
  out.push_back(std::move(used));
  out.push_back(std::move(free));
  if (!process.metric.empty()) out.push_back(std::move(process));
}

}  // namespace

std::vector<MetricFamily> to_metric_families(const MonitorSnapshot& snapshot, const MetricsOptions& options) {
  std::vector<MetricFamily> out;
  add_gpu_families(snapshot, options, out);

  if (!snapshot.allocators.empty()) {
    for (const AllocatorMetric& metric : kAllocatorMetrics) {
      MetricFamily f = family(metric.name, metric.help, metric.type);
      for (const alloc::PublishedBlock& block : snapshot.allocators) {
        const alloc::PublishedStats& s = block.stats;
        add(f,
            {{"Hostname", snapshot.hostname},
             {"pid", std::to_string(s.pid)},
             {"process", process_name(snapshot, s.pid)},
             {"cuda_device", std::to_string(s.device)}},
            metric.value(s));
      }
      out.push_back(std::move(f));
    }
  }

  MetricFamily up = family("gpumem_exporter_gpu_source_up",
                           "1 when the GPU source (NVML or the simulated GPU) answered.", MetricType::Gauge);
  add(up, {{"Hostname", snapshot.hostname}}, snapshot.gpus_up ? 1 : 0);
  out.push_back(std::move(up));
  MetricFamily processes =
      family("gpumem_exporter_allocators", "Allocators publishing statistics on this host.", MetricType::Gauge);
  add(processes, {{"Hostname", snapshot.hostname}}, as_double(snapshot.allocators.size()));
  out.push_back(std::move(processes));
  MetricFamily rejected = family("gpumem_exporter_rejected_blocks_total",
                                 "Published blocks refused: not gpumem's, another user's claim on a process, "
                                 "impossible figures, a duplicate or a rewrite (docs/exporter.md).",
                                 MetricType::Counter);
  add(rejected, {{"Hostname", snapshot.hostname}}, as_double(snapshot.rejected_blocks));
  out.push_back(std::move(rejected));
  MetricFamily collect = family("gpumem_exporter_collect_duration_seconds",
                                "How long reading the GPUs and the allocators' blocks took.", MetricType::Gauge);
  add(collect, {{"Hostname", snapshot.hostname}}, snapshot.collect_seconds);
  out.push_back(std::move(collect));
  return out;
}

std::string to_text(const std::vector<MetricFamily>& families) {
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace gpumem::monitor
