#pragma once
// `gpumem exporter --simulate TRACE`: a recorded trace replayed in real time
// (scaled by `speed`) through gpumem's caching allocator on a simulated GPU,
// publishing its statistics the way a real process does. The exporter then
// finds the block like any other and reports the simulated GPU as its
// device, so the whole chain (publish, discover, export, scrape, alert) runs
// on machines without a GPU.
//
// The trace plays in a loop, one pass after another; what a pass leaves
// allocated is freed before the next, as a job's step releases its
// temporaries. Every allocation runs on the default stream.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gpumem/alloc/config.h"
#include "gpumem/monitor/gpu_memory.h"

namespace gpumem::monitor {

struct SimulatedWorkloadOptions {
  std::string trace_path;
  double speed = 1.0;                            // 2: twice as fast as recorded
  std::size_t capacity = std::size_t{80} << 30;  // the simulated GPU's memory
  alloc::AllocatorConfig config = alloc::AllocatorConfig::gpumem_defaults();
  int device = 0;  // the device index the block is published under
  std::chrono::nanoseconds publish_interval = std::chrono::milliseconds(5);
  std::string publish_name;  // empty: "/gpumem.<pid>.<device>"
  // Without times in the trace (MiniMalloc CSV), events are this far apart.
  std::chrono::nanoseconds untimed_step = std::chrono::milliseconds(1);
};

// One step of the replay: allocate or free allocation `index` at `time_ns`
// from the pass's start.
struct WorkloadStep {
  std::int64_t time_ns = 0;
  std::uint32_t index = 0;
  bool free = false;
};

// The trace's busiest device as timed steps (allocations' sizes in *sizes).
// Throws InputError naming the file when it cannot be read or has nothing
// to replay.
std::vector<WorkloadStep> workload_steps(const SimulatedWorkloadOptions& options, std::vector<std::size_t>* sizes);

class SimulatedWorkload final : public GpuMemorySource {
 public:
  // Reads the trace (errors as workload_steps), starts publishing and the
  // replay thread.
  explicit SimulatedWorkload(SimulatedWorkloadOptions options);
  ~SimulatedWorkload() override;  // stops the thread; the block is unlinked
  SimulatedWorkload(const SimulatedWorkload&) = delete;
  SimulatedWorkload& operator=(const SimulatedWorkload&) = delete;

  // The simulated GPU as NVML would report it: index `device`, the capacity
  // as total, the simulated device's reserved memory as used, and this
  // process as its one compute process.
  std::vector<GpuMemory> read() override;
  std::uint64_t passes() const { return passes_.load(); }

 private:
  class Replay;
  SimulatedWorkloadOptions options_;
  // Before replay_: its thread counts passes from the moment it starts,
  // and stops before the count goes.
  std::atomic<std::uint64_t> passes_{0};
  std::unique_ptr<Replay> replay_;
};

}  // namespace gpumem::monitor
