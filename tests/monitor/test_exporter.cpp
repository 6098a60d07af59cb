// The exporter over real published blocks: what a scrape returns equals the
// allocator's own statistics, a crashed process leaves no series, the
// simulated workload stands in for a GPU job, and NVML's absence is told.
#include "gpumem/monitor/exporter.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include <fstream>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpumem/alloc/caching_allocator.h"
#include "gpumem/alloc/simulated_device.h"
#include "gpumem/alloc/stats_publisher.h"
#include "gpumem/common/error.h"
#include "gpumem/monitor/nvml.h"
#include "gpumem/monitor/simulated_workload.h"
#include "monitor/http_get.h"
#include "test_paths.h"

namespace gpumem::monitor {
namespace {

using namespace std::chrono_literals;

// Blocks under a prefix of this process's own, so tests running in
// parallel (and real jobs on the machine) never see each other's.
std::string prefix() { return "gpumemtest" + std::to_string(getpid()) + "."; }
std::string block_name(int device) { return "/" + prefix() + std::to_string(device); }

ExporterOptions test_options() {
  ExporterOptions o;
  o.listen = "127.0.0.1:0";
  o.interval = 50ms;
  o.hostname = "test-host";
  o.read.prefix = prefix();
  return o;
}

std::string line_of(const std::string& metric, int device, std::uint64_t value) {
  return metric + "{Hostname=\"test-host\",pid=\"" + std::to_string(getpid()) + "\",process=\"" +
         [] {
           std::ifstream in("/proc/self/comm");
           std::string n;
           std::getline(in, n);
           return n;
         }() +
         "\",cuda_device=\"" + std::to_string(device) + "\"} " + std::to_string(value) + "\n";
}

TEST(MonitorExporter, ScrapeEqualsTheAllocatorsOwnStatistics) {
  alloc::SimulatedDevice device;
  alloc::CachingAllocator allocator(alloc::simulated_upstream(device));
  std::vector<void*> live;
  for (int i = 1; i <= 12; ++i) live.push_back(allocator.allocate(static_cast<std::size_t>(i) * 300'000));
  for (std::size_t i = 0; i < live.size(); i += 3) allocator.deallocate(live[i], 0);
  alloc::StatsPublisher publisher(allocator, {.interval = 1h, .device = 3, .name = block_name(3)});
  publisher.publish_now();

  Exporter exporter(nullptr, test_options());
  exporter.collector().refresh();
  ASSERT_GT(exporter.port(), 0);
  const test::HttpResult r = test::http_get("http://127.0.0.1:" + std::to_string(exporter.port()) + "/metrics");
  ASSERT_EQ(r.status, 200);

  alloc::FreeSpace free_space;
  const alloc::AllocatorStats stats = allocator.stats(free_space);
  const auto current = [](const alloc::Stat& s) { return static_cast<std::uint64_t>(s.current); };
  EXPECT_NE(r.body.find(line_of("gpumem_allocator_allocated_bytes", 3, current(stats.allocated_bytes[0]))),
            std::string::npos)
      << r.body;
  EXPECT_NE(r.body.find(line_of("gpumem_allocator_reserved_bytes", 3, current(stats.reserved_bytes[0]))),
            std::string::npos);
  EXPECT_NE(r.body.find(line_of("gpumem_allocator_cached_free_bytes", 3, free_space.free_bytes)), std::string::npos);
  EXPECT_NE(r.body.find(line_of("gpumem_allocator_largest_free_block_bytes", 3, free_space.largest_block)),
            std::string::npos);
  EXPECT_NE(r.body.find(line_of("gpumem_allocator_live_allocations", 3, 8)), std::string::npos);
  EXPECT_GT(free_space.free_bytes, free_space.largest_block);  // the figures above are not all zero
  // No GPU source: no device series, and the exporter says why.
  EXPECT_EQ(r.body.find("gpumem_gpu_memory_used_bytes"), std::string::npos);
  EXPECT_NE(r.body.find("gpumem_exporter_gpu_source_up{Hostname=\"test-host\"} 0"), std::string::npos);
  for (void* p : live) allocator.free(p, 0);
}

TEST(MonitorExporter, ACrashedProcessLeavesNoSeries) {
  const std::string name = block_name(9);  // the parent's prefix: taken before fork
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    alloc::SimulatedDevice device;
    alloc::CachingAllocator allocator(alloc::simulated_upstream(device));
    (void)allocator.allocate(1 << 20);
    alloc::StatsPublisher publisher(allocator, {.interval = 1h, .device = 9, .name = name});
    raise(SIGKILL);  // no destructor runs: the blocks stay behind
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  ASSERT_EQ(access(("/dev/shm/" + prefix() + "9").c_str(), F_OK), 0) << "the killed child left its block";

  MetricsCollector collector(nullptr, test_options());
  const MonitorSnapshot s = collector.snapshot();
  for (const alloc::PublishedBlock& b : s.allocators) EXPECT_NE(b.stats.pid, static_cast<std::uint64_t>(child));
  EXPECT_NE(access(("/dev/shm/" + prefix() + "9").c_str(), F_OK), 0) << "the stale block is unlinked";
}

TEST(MonitorExporter, ListeningWhereItCannotIsOneLineNamingTheFlag) {
  Exporter first(nullptr, test_options());
  ExporterOptions taken = test_options();
  taken.listen = "127.0.0.1:" + std::to_string(first.port());
  try {
    Exporter second(nullptr, taken);
    FAIL() << "a second exporter on a taken port";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("--listen " + taken.listen + ": cannot listen there", 0), 0u) << e.what();
  }
}

TEST(MonitorExporter, CivetwebAddresses) {
  EXPECT_EQ(civetweb_address(":9400"), "9400");
  EXPECT_EQ(civetweb_address("127.0.0.1:9400"), "127.0.0.1:9400");
  EXPECT_EQ(civetweb_address("9400"), "9400");
  EXPECT_EQ(civetweb_address("[::1]:9400"), "[::1]:9400");
  EXPECT_EQ(civetweb_address("localhost:0"), "127.0.0.1:0");
  EXPECT_EQ(ExporterOptions{}.listen, "127.0.0.1:9400") << "loopback unless told otherwise";
  // Each of these once bound every interface or another address (issue 34).
  for (const char* bad : {"256.0.0.0:9400", "999.1.1.1:9400", "1.2.3:9400", "127.0.0.1:65536", "127.0.0.1:",
                          "127.0.0.1:94x0", "[::1]9400", "[zz::1]:9400", "::1:9400", "no-such-host.invalid:9400", ""}) {
    try {
      civetweb_address(bad);
      ADD_FAILURE() << bad << ": accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("--listen ", 0), 0u) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    }
  }
}

// Idle and slow clients (slowloris) once took /metrics away with two
// connections: it answers while 50 of them are open.
TEST(MonitorExporter, MetricsAnswerWhileFiftySlowClientsHang) {
  Exporter exporter(nullptr, test_options());
  std::vector<int> slow;
  for (int i = 0; i < 50; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(exporter.port()));
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
    const char* partial = i % 2 ? "GET /metrics HTTP/1.1\r\nHost: x\r\n" : "G";  // never finished
    ASSERT_GT(send(fd, partial, std::strlen(partial), MSG_NOSIGNAL), 0);
    slow.push_back(fd);
  }
  for (int probe = 0; probe < 10; ++probe) {
    const auto start = std::chrono::steady_clock::now();
    const test::HttpResult r = test::http_get("http://127.0.0.1:" + std::to_string(exporter.port()) + "/metrics", 1000);
    EXPECT_EQ(r.status, 200) << "probe " << probe;
    EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  }
  for (int fd : slow) close(fd);
}

TEST(MonitorSimulatedWorkload, StepsFollowTheTrace) {
  SimulatedWorkloadOptions o;
  o.trace_path = test::trace_path("resnet18_train.json");
  std::vector<std::size_t> sizes;
  const std::vector<WorkloadStep> steps = workload_steps(o, &sizes);
  ASSERT_FALSE(sizes.empty());
  std::size_t allocs = 0;
  std::vector<int> state(sizes.size(), 0);  // 0 never, 1 live, 2 freed
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (i > 0) EXPECT_GE(steps[i].time_ns, steps[i - 1].time_ns);
    int& s = state[steps[i].index];
    if (steps[i].free) {
      EXPECT_EQ(s, 1) << "a free before its allocation at step " << i;
      s = 2;
    } else {
      EXPECT_EQ(s, 0);
      s = 1;
      ++allocs;
    }
  }
  EXPECT_EQ(allocs, sizes.size());
  EXPECT_GT(steps.back().time_ns, 0) << "the trace's own times are kept";
}

TEST(MonitorSimulatedWorkload, PublishesAndReportsTheSimulatedGpu) {
  SimulatedWorkloadOptions o;
  o.trace_path = test::trace_path("resnet18_train.json");
  o.speed = 1000;
  o.device = 5;
  o.publish_interval = 1ms;
  o.capacity = std::size_t{16} << 30;
  o.publish_name = block_name(5);
  SimulatedWorkload workload(o);
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (workload.passes() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
  ASSERT_GE(workload.passes(), 2u) << "the trace replays in a loop";

  MetricsCollector collector(&workload, test_options());
  const MonitorSnapshot s = collector.snapshot();
  ASSERT_EQ(s.gpus.size(), 1u);
  EXPECT_TRUE(s.gpus_up);
  EXPECT_EQ(s.gpus[0].index, 5u);
  EXPECT_EQ(s.gpus[0].total_bytes, o.capacity);
  EXPECT_EQ(s.gpus[0].used_bytes + s.gpus[0].free_bytes, o.capacity);
  ASSERT_EQ(s.allocators.size(), 1u);
  const alloc::PublishedStats& b = s.allocators[0].stats;
  EXPECT_EQ(b.device, 5u);
  EXPECT_EQ(b.capacity, o.capacity);
  EXPECT_GT(b.reserved_bytes_peak, std::uint64_t{50} << 20) << "resnet18's training step reserves tens of MiB";
  EXPECT_GT(b.device_allocs, 0u);
}

TEST(MonitorSimulatedWorkload, AMissingTraceIsAnInputError) {
  SimulatedWorkloadOptions o;
  o.trace_path = "/nonexistent/trace.json";
  EXPECT_THROW(SimulatedWorkload{o}, InputError);
}

TEST(MonitorNvml, OpensOrSaysWhyNot) {
  std::string why;
  std::unique_ptr<NvmlSource> nvml = NvmlSource::open(&why);
  if (!nvml) {
    EXPECT_FALSE(why.empty());
    GTEST_SKIP() << "no NVML here: " << why;
  }
  const std::vector<GpuMemory> gpus = nvml->read();
  ASSERT_FALSE(gpus.empty());
  for (const GpuMemory& g : gpus) {
    EXPECT_GT(g.total_bytes, 0u);
    EXPECT_EQ(g.uuid.rfind("GPU-", 0), 0u) << g.uuid;
    EXPECT_LE(g.used_bytes, g.total_bytes);
  }
}

}  // namespace
}  // namespace gpumem::monitor
