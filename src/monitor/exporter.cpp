#include "gpumem/monitor/exporter.h"
#include "gpumem/common/flag_names.h"

#include <arpa/inet.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
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
    : gpus_(gpus), options_(std::move(options)), reader_(options_.read) {
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
  s.allocators = reader_.read();
  s.rejected_blocks = reader_.rejected();
  // Thousands of forged blocks that went: give their memory back.
  if (last_block_count_ > 256 && s.allocators.size() * 4 < last_block_count_) malloc_trim(0);
  last_block_count_ = s.allocators.size();
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
  const auto bad = [&](const std::string& why) {
    return InputError(fmt::format(GPUMEM_FLAG_LISTEN " {}: {} (give [HOST]:PORT: 9400, :9400 for every interface, "
                                                     "127.0.0.1:9400, [::1]:9400, localhost:9400)",
                                  printable(listen), why));
  };
  std::string host;
  std::string port = listen;
  if (!listen.empty() && listen.front() == '[') {
    const size_t close = listen.find(']');
    if (close == std::string::npos || close + 1 >= listen.size() || listen[close + 1] != ':')
      throw bad("an IPv6 address in brackets needs :PORT after it");
    host = listen.substr(0, close + 1);
    port = listen.substr(close + 2);
  } else if (const size_t colon = listen.rfind(':'); colon != std::string::npos) {
    host = listen.substr(0, colon);
    port = listen.substr(colon + 1);
  }
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(port) > 65535)
    throw bad("the port must be a number from 0 to 65535");
  if (host.empty()) return port;
  if (host.front() == '[') {
    in6_addr v6{};
    if (inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), &v6) != 1) throw bad("not an IPv6 address");
    return host + ":" + port;
  }
  if (host.find_first_not_of("0123456789.") == std::string::npos) {
    in_addr v4{};
    if (inet_pton(AF_INET, host.c_str(), &v4) != 1) throw bad("not an IPv4 address (four numbers from 0 to 255)");
    return host + ":" + port;
  }
  if (host.find(':') != std::string::npos) throw bad("write an IPv6 address in brackets");
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) throw bad("no such host here");
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(found->ai_addr)->sin_addr, text, sizeof text);
  freeaddrinfo(found);
  return std::string(text) + ":" + port;
}

Exporter::Exporter(GpuMemorySource* gpus, ExporterOptions options)
    : options_(std::move(options)), collector_(std::make_shared<MetricsCollector>(gpus, options_)) {
  collector_->refresh();                                          // the first scrape already has figures
  const std::string address = civetweb_address(options_.listen);  // an InputError of its own
  try {
    // Enough threads that idle and slow clients cannot take /metrics away,
    // and a timeout on every read and write so they go in the end.
    exposer_ = std::make_unique<prometheus::Exposer>(
        std::vector<std::string>{"listening_ports", address, "num_threads", "64", "request_timeout_ms", "2000"});
  } catch (const std::exception& e) {
    // CivetWeb says only "null context when constructing CivetServer".
    throw InputError(fmt::format(
        GPUMEM_FLAG_LISTEN
        " {}: cannot listen there: the port is in use (another exporter?) or the address is not one of this "
        "machine's; give another with " GPUMEM_FLAG_LISTEN " [HOST]:PORT (CivetWeb: {})",
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
