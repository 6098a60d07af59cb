// A process that uses gpumem's allocator the way a training loop does and
// publishes its statistics, for the Prometheus integration test: each
// iteration allocates a burst of activations, frees them, then idles at its
// trough for the rest of the period; with --leak-bytes it also keeps that
// much of every iteration. After --iterations it writes its statistics to
// --stats-file (atomically) and holds still until SIGTERM.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "gpumem/alloc/caching_allocator.h"
#include "gpumem/alloc/simulated_device.h"
#include "gpumem/alloc/stats_publisher.h"
#include "gpumem/common/files.h"

namespace {
std::atomic<bool> g_stop{false};
extern "C" void on_signal(int) { g_stop.store(true); }
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gpumem test workload"};
  std::string name, stats_file;
  long iterations = -1, period_ms = 20, leak_bytes = 0;
  app.add_option("--name", name, "The shared-memory block's name")->required();
  app.add_option("--iterations", iterations, "Stop after this many (-1: never)");
  app.add_option("--period-ms", period_ms);
  app.add_option("--leak-bytes", leak_bytes, "Kept from every iteration");
  app.add_option("--stats-file", stats_file, "Where the final statistics go");
  CLI11_PARSE(app, argc, argv);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);

  using namespace gpumem::alloc;
  SimulatedDevice device({.capacity = std::size_t{8} << 30});
  CachingAllocator allocator(simulated_upstream(device));
  StatsPublisher publisher(allocator, {.interval = std::chrono::milliseconds(5), .device = 0, .name = name});
  std::vector<void*> leaked;
  const auto period = std::chrono::milliseconds(period_ms);
  auto next = std::chrono::steady_clock::now();
  for (long i = 0; (iterations < 0 || i < iterations) && !g_stop.load(); ++i) {
    std::vector<void*> burst;
    // Activations of several sizes: small-pool and large-pool blocks.
    for (std::size_t k = 1; k <= 12; ++k) burst.push_back(allocator.allocate(k * 700'000 + (k % 3) * 4096));
    if (leak_bytes > 0) leaked.push_back(allocator.allocate(static_cast<std::size_t>(leak_bytes)));
    std::this_thread::sleep_for(period / 10);  // the peak lasts a tenth of the period
    for (void* p : burst) allocator.free(p, kDefaultStream);
    next += period;
    std::this_thread::sleep_until(next);
  }
  if (!stats_file.empty()) {
    publisher.publish_now();
    FreeSpace free_space;
    const AllocatorStats s = allocator.stats(free_space);
    const nlohmann::json j = {
        {"allocated_bytes", s.allocated_bytes[0].current}, {"reserved_bytes", s.reserved_bytes[0].current},
        {"active_bytes", s.active_bytes[0].current},       {"requested_bytes", s.requested_bytes[0].current},
        {"cached_free_bytes", free_space.free_bytes},      {"largest_free_block_bytes", free_space.largest_block},
        {"live_allocations", s.allocation[0].current},     {"segments", s.segment[0].current},
        {"device_allocs_total", s.num_device_alloc},       {"device_frees_total", s.num_device_free}};
    gpumem::write_file_atomically(stats_file, j.dump());
  }
  while (!g_stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (void* p : leaked) allocator.free(p, kDefaultStream);
  return 0;
}
