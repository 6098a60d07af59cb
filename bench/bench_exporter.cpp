// What a scrape costs the exporter on a busy node: 8 GPUs, 64 processes
// that publish allocator statistics (real child processes, each with its
// own block), and NVML's figures from a fixed source listing the same 64
// processes. Issue 15's goal: a scrape answers in under 10 ms.
//
//   build/bench/gpumem_exporter_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// BM_Collect reads every block and the GPUs and builds the families (what
// the exporter does each --interval); BM_Serialize writes them as text;
// BM_Scrape is a whole HTTP GET of /metrics over loopback, as Prometheus
// makes it.
#include <benchmark/benchmark.h>

#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include <curl/curl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpumem/alloc/stats_publisher.h"
#include "gpumem/monitor/exporter.h"
#include "gpumem/monitor/metrics.h"

namespace {

using namespace gpumem;

constexpr int kGpus = 8;
constexpr int kProcesses = 64;

std::string prefix() {
  static const std::string p = "gpumembench" + std::to_string(getpid()) + ".";
  return p;
}

class FixedGpus final : public monitor::GpuMemorySource {
 public:
  explicit FixedGpus(const std::vector<pid_t>& pids) {
    for (int g = 0; g < kGpus; ++g) {
      monitor::GpuMemory gpu;
      gpu.index = gpu.minor = static_cast<unsigned>(g);
      gpu.uuid = "GPU-bench-" + std::to_string(g);
      gpu.model = "NVIDIA H200";
      gpu.total_bytes = 150'754'820'096;
      gpu.used_bytes = std::uint64_t{100} << 30;
      gpu.free_bytes = gpu.total_bytes - gpu.used_bytes;
      for (std::size_t p = static_cast<std::size_t>(g); p < pids.size(); p += kGpus) {
        gpu.processes.push_back({static_cast<std::uint32_t>(pids[p]), std::uint64_t{12} << 30});
      }
      gpus_.push_back(gpu);
    }
  }
  std::vector<monitor::GpuMemory> read() override { return gpus_; }

 private:
  std::vector<monitor::GpuMemory> gpus_;
};

// 64 child processes, each publishing one block for its GPU until killed.
std::vector<pid_t> start_publishers() {
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const std::string name = "/" + prefix() + std::to_string(p);
    const pid_t child = fork();
    if (child == 0) {
      alloc::StatsSample sample;
      // Figures the exporter takes as possible: peaks at least the current values.
      sample.stats.allocated_bytes[0].current = sample.stats.allocated_bytes[0].peak = (std::int64_t{10} << 30) + p;
      sample.stats.reserved_bytes[0].current = sample.stats.reserved_bytes[0].peak = std::int64_t{12} << 30;
      sample.free_space.free_bytes = std::size_t{2} << 30;
      sample.free_space.largest_block = std::size_t{1} << 30;
      sample.capacity = 150'754'820'096;
      alloc::StatsPublisher publisher([sample] { return sample; },
                                      {.interval = std::chrono::milliseconds(5), .device = p % kGpus, .name = name});
      pause();  // SIGTERM ends it; the destructor does not run, the reader unlinks the block
      _exit(0);
    }
    children.push_back(child);
  }
  return children;
}

monitor::ExporterOptions options() {
  monitor::ExporterOptions o;
  o.listen = "127.0.0.1:0";
  o.read.prefix = prefix();
  o.hostname = "bench-node";
  return o;
}

std::vector<pid_t>& children() {
  static std::vector<pid_t> c;
  return c;
}

void BM_Collect(benchmark::State& state) {
  FixedGpus gpus(children());
  monitor::MetricsCollector collector(&gpus, options());
  for (auto _ : state) collector.refresh();
  const monitor::MonitorSnapshot s = collector.snapshot();
  if (s.allocators.size() != kProcesses) state.SkipWithError("not every child's block was read");
  state.counters["blocks"] = static_cast<double>(s.allocators.size());
}
BENCHMARK(BM_Collect)->Unit(benchmark::kMillisecond);

void BM_Serialize(benchmark::State& state) {
  FixedGpus gpus(children());
  monitor::MetricsCollector collector(&gpus, options());
  collector.refresh();
  const auto families = collector.Collect();
  std::size_t bytes = 0;
  for (auto _ : state) bytes = monitor::to_text(families).size();
  state.counters["text_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_Serialize)->Unit(benchmark::kMillisecond);

std::size_t discard(char*, std::size_t size, std::size_t count, void*) { return size * count; }

void BM_Scrape(benchmark::State& state) {
  FixedGpus gpus(children());
  monitor::Exporter exporter(&gpus, options());
  const std::string url = "http://127.0.0.1:" + std::to_string(exporter.port()) + "/metrics";
  CURL* curl = curl_easy_init();
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_PROXY, "");
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_FORBID_REUSE, 1L);  // civetweb closes after each answer
  for (auto _ : state) {
    if (const CURLcode code = curl_easy_perform(curl); code != CURLE_OK) {
      state.SkipWithError(curl_easy_strerror(code));
      break;
    }
  }
  curl_easy_cleanup(curl);
}
BENCHMARK(BM_Scrape)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  children() = start_publishers();
  usleep(200'000);  // every child has written its first block
  benchmark::RunSpecifiedBenchmarks();
  for (pid_t c : children()) kill(c, SIGTERM);
  for (pid_t c : children()) waitpid(c, nullptr, 0);
  // The children's blocks are stale now: one read unlinks them all.
  gpumem::alloc::ReadOptions read;
  read.prefix = prefix();
  gpumem::alloc::read_published_stats(read);
  benchmark::Shutdown();
  return 0;
}
