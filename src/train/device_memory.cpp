#include "gpumem/train/device_memory.h"

#include <algorithm>

#include <fmt/format.h>

#include "gpumem/common/device_overhead.h"
#include "gpumem/common/error.h"
#include "gpumem/trace/lifetimes.h"
#include "gpumem/trace/replay.h"

namespace gpumem::train {

const std::vector<std::string>& step_allocator_names() {
  static const std::vector<std::string> names = {"pytorch", "pytorch-expandable", "gpumem", "gpumem-expandable"};
  return names;
}

std::string step_allocator(const TrainOptions& options) {
  if (options.device == Device::kCpu) {
    if (!options.allocator.empty()) {
      throw InputError(fmt::format("--allocator {}: --device cpu has no caching allocator (what is allocated is held)",
                                   options.allocator));
    }
    return "";
  }
  if (options.allocator.empty()) return "pytorch";
  const auto& names = step_allocator_names();
  if (std::find(names.begin(), names.end(), options.allocator) == names.end()) {
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    throw InputError(fmt::format("--allocator {}: unknown allocator (known: {})", options.allocator, known));
  }
  return options.allocator;
}

uint64_t step_overhead(const TrainOptions& options) {
  if (options.overhead_bytes) return *options.overhead_bytes;
  return options.device == Device::kCpu ? 0 : kDefaultCudaOverheadBytes;
}

DeviceMemory device_memory(const TrainingStep& step, uint64_t budget) {
  DeviceMemory d;
  d.allocator = step_allocator(step.options);
  d.allocated_peak = step.peak_bytes;
  d.overhead = step_overhead(step.options);
  d.reserved_peak = step.peak_bytes;
  if (d.allocator.empty()) {
    d.runs_out = budget > 0 && d.device_bytes() > budget;
    return d;
  }
  const trace::Trace t = step_trace(step, /*contexts=*/false);
  const trace::Lifetimes lifetimes = trace::extract_lifetimes(t, 0, /*strict=*/true);
  auto replay = [&](uint64_t capacity) { return trace::replay_policy(t, lifetimes, d.allocator, capacity); };
  if (budget > 0) {
    if (budget > d.overhead) {
      const trace::PolicyResult limited = replay(budget - d.overhead);
      if (!limited.oom_at_event) {
        d.reserved_peak = static_cast<uint64_t>(limited.peak_reserved);
        return d;
      }
    }
    d.runs_out = true;
  }
  d.reserved_peak = static_cast<uint64_t>(replay(0).peak_reserved);
  return d;
}

}  // namespace gpumem::train
