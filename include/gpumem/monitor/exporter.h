#pragma once
// `gpumem exporter`: device memory (a GpuMemorySource: NVML or the simulated
// GPU) and every published allocator block on this host, served to
// Prometheus at /metrics through prometheus-cpp's HTTP exposer.
//
// Figures are collected every `interval` and scrapes answer with the latest
// collection, as dcgm-exporter does: a scrape costs the serialization only,
// however many processes there are, and NVML is never asked more often than
// the interval.
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <prometheus/collectable.h>

#include "gpumem/alloc/stats_publisher.h"
#include "gpumem/monitor/gpu_memory.h"
#include "gpumem/monitor/metrics.h"

namespace prometheus {
class Exposer;
}

namespace gpumem::monitor {

struct ExporterOptions {
  std::string listen = "127.0.0.1:9400";  // [host]:port (":port": every interface); port 0 takes a free one
  std::chrono::milliseconds interval{1000};
  MetricsOptions metrics;
  alloc::ReadOptions read;
  std::string hostname;  // the Hostname label; empty: this host's name
};

// Reads the GPUs and the published blocks, and keeps the latest result as
// metric families for scrapes.
class MetricsCollector final : public prometheus::Collectable {
 public:
  // `gpus` may be null (no GPU source: device metrics are left out); it must
  // outlive the collector.
  MetricsCollector(GpuMemorySource* gpus, ExporterOptions options);
  MonitorSnapshot snapshot();  // reads everything now
  void refresh();              // snapshot() as metric families, for Collect()
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  struct ProcessName {
    std::uint64_t process_start = 0;
    std::string name;
  };
  GpuMemorySource* gpus_;
  ExporterOptions options_;
  std::map<std::uint64_t, ProcessName> names_;  // by pid; one collection at a time
  alloc::PublishedStatsReader reader_;          // remembers each block between collections
  std::size_t last_block_count_ = 0;
  mutable std::mutex latest_mutex_;
  std::vector<prometheus::MetricFamily> latest_;
};

class Exporter {
 public:
  // Listens at once. Throws InputError naming --listen when it cannot.
  Exporter(GpuMemorySource* gpus, ExporterOptions options);
  ~Exporter();
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  int port() const;  // the port listened on (what port 0 became)
  MetricsCollector& collector() { return *collector_; }
  // Collects every interval until `stop` becomes true.
  void run(const std::atomic<bool>& stop);

 private:
  ExporterOptions options_;
  std::shared_ptr<MetricsCollector> collector_;
  std::unique_ptr<prometheus::Exposer> exposer_;
};

// --listen as civetweb's listening_ports takes it, read strictly: PORT or
// :PORT (every interface), IPV4:PORT, [IPV6]:PORT, or HOST:PORT (resolved
// to its first IPv4 address). Anything else, an octet over 255 or a port
// over 65535 among them, is an InputError naming --listen.
std::string civetweb_address(const std::string& listen);

}  // namespace gpumem::monitor
