#include "gpumem/train/device_memory.h"
#include "gpumem/common/flag_names.h"

#include <algorithm>

#include <fmt/format.h>

#include "gpumem/alloc/policies/policy_run.h"
#include "gpumem/common/device_defaults.h"
#include "gpumem/common/error.h"

namespace gpumem::train {

std::vector<std::string> step_allocator_names() { return alloc::policy_names(&alloc::PolicyEntry::for_training_steps); }

std::string step_allocator(const TrainOptions& options) {
  if (options.device == Device::kCpu) {
    if (!options.allocator.empty()) {
      throw InputError(fmt::format(GPUMEM_FLAG_ALLOCATOR " {}: " GPUMEM_FLAG_DEVICE
                                                         " cpu has no caching allocator (what is allocated is held)",
                                   options.allocator));
    }
    return "";
  }
  if (options.allocator.empty()) return alloc::training_default_policy().name;
  const alloc::PolicyEntry* entry = alloc::find_policy(options.allocator);
  if (entry == nullptr || !entry->for_training_steps) {
    std::string known;
    for (const auto& n : step_allocator_names()) known += (known.empty() ? "" : ", ") + n;
    throw InputError(fmt::format(GPUMEM_FLAG_ALLOCATOR " {}: unknown allocator (known: {})", options.allocator, known));
  }
  return options.allocator;
}

uint64_t step_overhead(const TrainOptions& options) {
  if (options.overhead_bytes) return *options.overhead_bytes;
  return options.device == Device::kCpu ? 0 : kDefaultCudaOverheadBytes;
}

namespace {

// A GPU with room to spare for this step: every allocation in a segment of
// its own, rounded up as the caching allocator rounds, twice over. The
// policy runner's own "unlimited" (2 TiB) is not enough for every step a
// file can describe, and a replay that ran out there would report what it
// held when it failed as the step's reserved peak.
std::size_t room_to_spare(const alloc::AllocationSequence& sequence) {
  constexpr uint64_t kSegment = uint64_t{2} << 20, kCeiling = uint64_t{1} << 62;
  uint64_t total = uint64_t{2} << 40;
  for (const std::size_t size : sequence.sizes) {
    total += 2 * ((static_cast<uint64_t>(size) + kSegment) / kSegment * kSegment);
    if (total >= kCeiling) return static_cast<std::size_t>(kCeiling);
  }
  return static_cast<std::size_t>(total);
}

}  // namespace

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
  const alloc::PolicyEntry& policy = alloc::policy_named(d.allocator, GPUMEM_FLAG_ALLOCATOR);
  const alloc::AllocationSequence sequence = step_sequence(step);
  auto run = [&](uint64_t capacity) { return alloc::run_policy(policy, sequence, {.capacity = capacity}); };
  if (budget > 0) {
    if (budget > d.overhead) {
      const alloc::PolicyRun limited = run(budget - d.overhead);
      if (!limited.oom_at_event) {
        d.reserved_peak = static_cast<uint64_t>(limited.peak_reserved);
        return d;
      }
    }
    d.runs_out = true;
  }
  d.reserved_peak = static_cast<uint64_t>(run(room_to_spare(sequence)).peak_reserved);
  return d;
}

uint64_t least_device_bytes(const TrainingStep& step, uint64_t budget) {
  const DeviceMemory unconstrained = device_memory(step);
  if (unconstrained.allocator.empty()) return unconstrained.device_bytes();  // the CPU: nothing cached
  const uint64_t overhead = unconstrained.overhead;
  const auto runs = [&](uint64_t device) { return device > overhead && !device_memory(step, device).runs_out; };
  constexpr uint64_t kGrain = uint64_t{2} << 20;
  // The step cannot run in less than its tensors; it runs in what it
  // reserves with no cap. The search does not depend on `budget`, so every
  // command gets the same figure for the same step.
  uint64_t lo = unconstrained.allocated_peak + overhead - 1;  // does not run
  uint64_t hi = unconstrained.device_bytes();                 // runs
  while (hi - lo > kGrain) {
    const uint64_t mid = lo + (hi - lo) / 2;
    (runs(mid) ? hi : lo) = mid;
  }
  // Running under a cap is not monotone in the cap for every allocator: the
  // replay at `budget` is the truth for that GPU, and the figure follows it.
  if (budget != 0) {
    const bool ran = runs(budget);
    if (ran && hi > budget) return budget;
    if (!ran && hi <= budget) return budget + 1;
  }
  return hi;
}

}  // namespace gpumem::train
