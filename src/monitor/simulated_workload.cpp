#include "gpumem/monitor/simulated_workload.h"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include <fmt/format.h>

#include "gpumem/alloc/caching_allocator.h"
#include "gpumem/alloc/simulated_device.h"
#include "gpumem/alloc/stats_publisher.h"
#include "gpumem/common/error.h"
#include "gpumem/trace/lifetimes.h"
#include "gpumem/trace/trace.h"

namespace gpumem::monitor {

std::vector<WorkloadStep> workload_steps(const SimulatedWorkloadOptions& options, std::vector<std::size_t>* sizes) {
  const trace::Trace t = trace::read_trace(options.trace_path);
  trace::require_memory_events(t, /*history_needed=*/true);
  const trace::Lifetimes lifetimes = trace::extract_lifetimes(t, trace::busiest_device(t), /*strict=*/false);
  if (lifetimes.allocations.empty()) {
    throw InputError(fmt::format("{}: no allocation to replay on its busiest device", options.trace_path));
  }
  if (lifetimes.allocations.size() > UINT32_MAX) {
    throw InputError(fmt::format("{}: {} allocations, more than a simulated workload replays", options.trace_path,
                                 lifetimes.allocations.size()));
  }

  // Each event's time from the trace's first timed event; untimed events
  // take the untimed step after the one before. Times never go backwards.
  std::vector<std::int64_t> time_of(t.events.size(), 0);
  std::int64_t first = trace::kUnknown;
  std::int64_t last = 0;
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const std::int64_t raw = t.events[i].time_ns;
    std::int64_t at = last + (i == 0 ? 0 : options.untimed_step.count());
    if (raw != trace::kUnknown) {
      if (first == trace::kUnknown) first = raw;
      at = std::max(last, raw - first);
    }
    time_of[i] = last = at;
  }

  std::vector<WorkloadStep> steps;
  steps.reserve(lifetimes.allocations.size() * 2);
  sizes->clear();
  for (std::size_t i = 0; i < lifetimes.allocations.size(); ++i) {
    const trace::Allocation& a = lifetimes.allocations[i];
    sizes->push_back(static_cast<std::size_t>(std::max<std::int64_t>(a.size, 1)));
    steps.push_back({time_of[a.alloc_event], static_cast<std::uint32_t>(i), false});
    if (a.free_event != trace::kNeverFreed)
      steps.push_back({time_of[a.free_event], static_cast<std::uint32_t>(i), true});
  }
  // By time; at one time, in the trace's order (an allocation's free never
  // precedes it: its event comes later).
  std::stable_sort(steps.begin(), steps.end(),
                   [](const WorkloadStep& a, const WorkloadStep& b) { return a.time_ns < b.time_ns; });
  return steps;
}

class SimulatedWorkload::Replay {
 public:
  Replay(const SimulatedWorkloadOptions& options, std::atomic<std::uint64_t>& passes)
      : options_(options),
        steps_(workload_steps(options, &sizes_)),
        device_({.capacity = options.capacity}),
        allocator_(alloc::simulated_upstream(device_), options.config),
        publisher_(allocator_,
                   {.interval = options.publish_interval, .device = options.device, .name = options.publish_name}),
        passes_(passes) {
    thread_ = std::thread([this] { loop(); });
  }

  ~Replay() {
    {
      std::lock_guard lock(stop_mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

  std::size_t device_used() const { return device_used_.load(); }

 private:
  // Waits until `deadline`; false when stopped meanwhile.
  bool wait_until(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lock(stop_mutex_);
    return !wake_.wait_until(lock, deadline, [this] { return stop_.load(); });
  }

  void loop() {
    std::vector<void*> live(sizes_.size(), nullptr);
    const double speed = options_.speed > 0 ? options_.speed : 1.0;
    while (true) {
      const auto start = std::chrono::steady_clock::now();
      for (const WorkloadStep& step : steps_) {
        const auto due =
            start + std::chrono::nanoseconds(static_cast<std::int64_t>(static_cast<double>(step.time_ns) / speed));
        // Steps less than a millisecond ahead run at once: sleeping for each
        // would cost more than the gap.
        if (due - std::chrono::steady_clock::now() > std::chrono::milliseconds(1) && !wait_until(due)) return;
        if (stop_.load(std::memory_order_relaxed)) return;
        run(step, live);
      }
      for (std::size_t i = 0; i < live.size(); ++i) {
        if (live[i]) allocator_.free(live[i], alloc::kDefaultStream);
        live[i] = nullptr;
      }
      device_used_.store(device_.counters().physical_used);
      ++passes_;
      // A pause between passes, as between a job's steps, so a pass is never
      // a busy loop even for a trace without times.
      if (!wait_until(std::chrono::steady_clock::now() + std::chrono::milliseconds(10))) return;
    }
  }

  void run(const WorkloadStep& step, std::vector<void*>& live) {
    if (step.free) {
      if (live[step.index]) allocator_.free(live[step.index], alloc::kDefaultStream);
      live[step.index] = nullptr;
    } else {
      try {
        live[step.index] = allocator_.allocate(sizes_[step.index], alloc::kDefaultStream);
      } catch (const alloc::OutOfMemoryError&) {
        live[step.index] = nullptr;  // counted by the allocator, published as ooms
      }
    }
    device_used_.store(device_.counters().physical_used);
  }

  const SimulatedWorkloadOptions& options_;
  std::vector<std::size_t> sizes_;
  std::vector<WorkloadStep> steps_;
  alloc::SimulatedDevice device_;
  alloc::CachingAllocator allocator_;
  alloc::StatsPublisher publisher_;
  std::atomic<std::uint64_t>& passes_;
  std::atomic<std::size_t> device_used_{0};
  std::mutex stop_mutex_;
  std::condition_variable wake_;
  std::atomic<bool> stop_{false};  // set under stop_mutex_, so a waiter cannot miss it; read per step without it
  std::thread thread_;
};

SimulatedWorkload::SimulatedWorkload(SimulatedWorkloadOptions options)
    : options_(std::move(options)), replay_(std::make_unique<Replay>(options_, passes_)) {}

SimulatedWorkload::~SimulatedWorkload() = default;

std::vector<GpuMemory> SimulatedWorkload::read() {
  GpuMemory gpu;
  gpu.index = static_cast<unsigned>(std::max(options_.device, 0));
  gpu.minor = gpu.index;
  gpu.uuid = fmt::format("GPU-00000000-0000-0000-0000-{:012d}", gpu.index);
  gpu.model = "gpumem simulated GPU";
  gpu.total_bytes = options_.capacity;
  gpu.used_bytes = std::min<std::uint64_t>(replay_->device_used(), options_.capacity);
  gpu.free_bytes = gpu.total_bytes - gpu.used_bytes;
  gpu.processes.push_back({static_cast<std::uint32_t>(getpid()), gpu.used_bytes});
  return {gpu};
}

}  // namespace gpumem::monitor
