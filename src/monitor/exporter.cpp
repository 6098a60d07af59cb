#include "gpumem/monitor/exporter.h"

#include <unistd.h>

#include <fstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <prometheus/exposer.h>

#include "gpumem/common/error.h"

namespace gpumem::monitor {
namespace {

std::string this_host() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

std::string read_comm(std::uint64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

}  // namespace

MetricsCollector::MetricsCollector(GpuMemorySource* gpus, ExporterOptions options)
    : gpus_(gpus), options_(std::move(options)) {
  if (options_.hostname.empty()) options_.hostname = this_host();
}

MonitorSnapshot MetricsCollector::snapshot() {
  const auto start = std::chrono::steady_clock::now();
  MonitorSnapshot s;
  s.hostname = options_.hostname;
  if (gpus_) {
    try {
      s.gpus = gpus_->read();
      s.gpus_up = true;
    } catch (const std::exception&) {
      s.gpus.clear();  // down this time; gpumem_exporter_gpu_source_up says so
    }
  }
  s.allocators = alloc::read_published_stats(options_.read);
  // Each process's name is read once while it lives: again only when its
  // pid now belongs to a process started at another time (NVML does not
  // say when a process started: 0, the known name stands).
  std::map<std::uint64_t, ProcessName> seen;
  const auto name_of = [&](std::uint64_t pid, std::uint64_t process_start) {
    ProcessName& name = seen[pid];
    if (name.name.empty()) {
      const auto known = names_.find(pid);
      if (known != names_.end() && (process_start == 0 || known->second.process_start == process_start)) {
        name = known->second;
      } else {
        name = {process_start, read_comm(pid)};
      }
    }
    return name.name;
  };
  for (const alloc::PublishedBlock& block : s.allocators) {
    s.process_names[block.stats.pid] = name_of(block.stats.pid, block.stats.process_start);
  }
  for (const GpuMemory& gpu : s.gpus) {
    for (const ProcessGpuMemory& p : gpu.processes) s.process_names[p.pid] = name_of(p.pid, 0);
  }
  names_ = std::move(seen);  // forget processes that are gone
  s.collect_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s;
}

void MetricsCollector::refresh() {
  std::vector<prometheus::MetricFamily> families = to_metric_families(snapshot(), options_.metrics);
  std::lock_guard lock(latest_mutex_);
  latest_ = std::move(families);
}

std::vector<prometheus::MetricFamily> MetricsCollector::Collect() const {
  std::lock_guard lock(latest_mutex_);
  return latest_;
}

std::string civetweb_address(const std::string& listen) {
  if (!listen.empty() && listen.front() == ':') return listen.substr(1);
  return listen;
}

Exporter::Exporter(GpuMemorySource* gpus, ExporterOptions options)
    : options_(std::move(options)), collector_(std::make_shared<MetricsCollector>(gpus, options_)) {
  collector_->refresh();  // the first scrape already has figures
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(civetweb_address(options_.listen), 2);
  } catch (const std::exception& e) {
    // CivetWeb says only "null context when constructing CivetServer".
    throw InputError(fmt::format(
        "--listen {}: cannot listen there: the port is in use (another exporter?) or the address is not one of this "
        "machine's; give another with --listen [HOST]:PORT (CivetWeb: {})",
        options_.listen, e.what()));
  }
  exposer_->RegisterCollectable(collector_);
}

Exporter::~Exporter() = default;

int Exporter::port() const {
  const std::vector<int> ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

void Exporter::run(const std::atomic<bool>& stop) {
  auto next = std::chrono::steady_clock::now();
  while (!stop.load()) {
    next += options_.interval;
    // Sleep in short steps so a signal is answered promptly.
    while (!stop.load() && std::chrono::steady_clock::now() < next) {
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(next - std::chrono::steady_clock::now(),
                                                                                std::chrono::milliseconds(50)));
    }
    if (stop.load()) break;
    collector_->refresh();
    const auto now = std::chrono::steady_clock::now();
    if (next < now) next = now;  // a slow collection skips ticks instead of bunching them
  }
}

}  // namespace gpumem::monitor
