// Snapshot -> Prometheus families: names, labels and exact values.
#include "gpumem/monitor/metrics.h"

#include <gtest/gtest.h>

#include <string>

namespace gpumem::monitor {
namespace {

MonitorSnapshot two_gpus_one_process() {
  MonitorSnapshot s;
  s.hostname = "node-7";
  s.gpus_up = true;
  GpuMemory gpu;
  gpu.index = 1;
  gpu.minor = 3;
  gpu.uuid = "GPU-abc";
  gpu.model = "NVIDIA H200";
  gpu.total_bytes = 150'754'820'096;                  // an H200's 143,771 MiB
  gpu.used_bytes = (std::uint64_t{5} << 30) + 12345;  // not whole MiB: dcgm's figure is floored
  gpu.free_bytes = gpu.total_bytes - gpu.used_bytes;
  gpu.processes.push_back({4242, std::uint64_t{5} << 30});
  s.gpus.push_back(gpu);
  alloc::PublishedBlock block;
  block.name = "/gpumem.4242.0";
  block.stats = {};
  block.stats.pid = 4242;
  block.stats.device = 0;
  block.stats.allocated_bytes = 3'221'225'472 + 512;
  block.stats.reserved_bytes = 4'294'967'296;
  block.stats.cached_free_bytes = 1'073'741'312;
  block.stats.largest_free_block = 268'435'456;
  block.stats.fragmentation_ppm = 749'999;
  block.stats.ooms = 2;
  block.stats.capacity = gpu.total_bytes;
  s.allocators.push_back(block);
  s.process_names[4242] = "python3";
  return s;
}

TEST(MonitorMetrics, TextHasExactBytesAndDcgmMiB) {
  const std::string text = to_text(to_metric_families(two_gpus_one_process()));
  const std::string gpu = R"({gpu="1",UUID="GPU-abc",device="nvidia3",Hostname="node-7"})";
  EXPECT_NE(text.find("DCGM_FI_DEV_FB_USED" + gpu + " 5120\n"), std::string::npos) << text;
  EXPECT_NE(text.find("gpumem_gpu_memory_used_bytes" + gpu + " 5368721465\n"), std::string::npos) << text;
  EXPECT_NE(text.find("gpumem_gpu_memory_total_bytes" + gpu + " 150754820096\n"), std::string::npos) << text;
  EXPECT_NE(
      text.find(
          R"(gpumem_gpu_info{gpu="1",UUID="GPU-abc",device="nvidia3",Hostname="node-7",model_name="NVIDIA H200"} 1)"),
      std::string::npos);
  EXPECT_NE(
      text.find(
          R"(gpumem_gpu_process_memory_bytes{gpu="1",UUID="GPU-abc",Hostname="node-7",pid="4242",process="python3"} 5368709120)"),
      std::string::npos);
  const std::string proc = R"({Hostname="node-7",pid="4242",process="python3",cuda_device="0"})";
  EXPECT_NE(text.find("gpumem_allocator_allocated_bytes" + proc + " 3221225984\n"), std::string::npos) << text;
  EXPECT_NE(text.find("gpumem_allocator_reserved_bytes" + proc + " 4294967296\n"), std::string::npos);
  EXPECT_NE(text.find("gpumem_allocator_fragmentation_ratio" + proc + " 0.749999\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE gpumem_allocator_ooms_total counter"), std::string::npos);
  EXPECT_NE(text.find("gpumem_allocator_ooms_total" + proc + " 2\n"), std::string::npos);
  EXPECT_NE(text.find(R"(gpumem_exporter_gpu_source_up{Hostname="node-7"} 1)"), std::string::npos);
  EXPECT_NE(text.find(R"(gpumem_exporter_allocators{Hostname="node-7"} 1)"), std::string::npos);
}

TEST(MonitorMetrics, EveryFamilyHasHelpAndCountersEndInTotal) {
  for (const auto& f : to_metric_families(two_gpus_one_process())) {
    EXPECT_FALSE(f.help.empty()) << f.name;
    const bool total = f.name.size() > 6 && f.name.compare(f.name.size() - 6, 6, "_total") == 0;
    EXPECT_EQ(f.type == prometheus::MetricType::Counter, total) << f.name;
    EXPECT_FALSE(f.metric.empty()) << f.name;
  }
}

TEST(MonitorMetrics, NoDcgmNamesWhenAskedAndNoDeviceSeriesWithoutGpus) {
  MetricsOptions no_dcgm;
  no_dcgm.dcgm_names = false;
  const std::string text = to_text(to_metric_families(two_gpus_one_process(), no_dcgm));
  EXPECT_EQ(text.find("DCGM_"), std::string::npos);
  EXPECT_NE(text.find("gpumem_gpu_memory_used_bytes"), std::string::npos);

  MonitorSnapshot down = two_gpus_one_process();
  down.gpus.clear();
  down.gpus_up = false;
  const std::string without = to_text(to_metric_families(down));
  EXPECT_EQ(without.find("gpumem_gpu_"), std::string::npos);
  EXPECT_EQ(without.find("DCGM_"), std::string::npos);
  EXPECT_NE(without.find(R"(gpumem_exporter_gpu_source_up{Hostname="node-7"} 0)"), std::string::npos);
  EXPECT_NE(without.find("gpumem_allocator_allocated_bytes"), std::string::npos);
}

TEST(MonitorMetrics, OneSeriesPerProcessAndDevice) {
  MonitorSnapshot s = two_gpus_one_process();
  alloc::PublishedBlock second = s.allocators.front();
  second.stats.device = 1;
  second.stats.allocated_bytes = 7;
  s.allocators.push_back(second);
  const std::string text = to_text(to_metric_families(s));
  EXPECT_NE(
      text.find(
          R"(gpumem_allocator_allocated_bytes{Hostname="node-7",pid="4242",process="python3",cuda_device="1"} 7)"),
      std::string::npos);
  EXPECT_NE(text.find(R"(gpumem_exporter_allocators{Hostname="node-7"} 2)"), std::string::npos);
}

}  // namespace
}  // namespace gpumem::monitor
