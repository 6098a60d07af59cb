#pragma once
// What a predicted training step takes on the device, not only what its
// tensors take: the allocated peak (PyTorch's max_memory_allocated), the
// reserved peak (max_memory_reserved: the step replayed under the caching
// allocator the user runs, rounding and cached segments included) and the
// device total (reserved + the CUDA context and library workspaces, which
// no allocator sees). "Fits" is decided on the device total.
#include <cstdint>
#include <string>
#include <vector>

#include "gpumem/train/training_step.h"

namespace gpumem::train {

// The allocators `--allocator` names: the policies the policy table marks
// for training steps (alloc/policies/policy_registry.h: PyTorch's caching
// allocator with and without expandable segments, gpumem's own loaded into
// PyTorch), each run on the simulated GPU as `gpumem replay` runs it.
std::vector<std::string> step_allocator_names();

// The allocator options.allocator names, the table's training default
// ("pytorch") when empty; "" on
// --device cpu, where PyTorch's CPU allocator keeps no cache (reserved is
// allocated). Throws InputError for a name step_allocator_names() lacks, or
// an allocator given with --device cpu.
std::string step_allocator(const TrainOptions& options);
// options.overhead_bytes, or the default: kDefaultCudaOverheadBytes on
// CUDA, 0 on CPU.
uint64_t step_overhead(const TrainOptions& options);

struct DeviceMemory {
  std::string allocator;        // as replayed; "" on cpu
  uint64_t allocated_peak = 0;  // the step's tensors at their most
  uint64_t reserved_peak = 0;   // what the allocator held at its most
  uint64_t overhead = 0;        // CUDA context and workspaces
  // With a budget: the allocator could not serve the step within the
  // budget less the overhead (reserved_peak is then what it would need).
  bool runs_out = false;
  uint64_t device_bytes() const { return reserved_peak + overhead; }
};

// The step on the device: step_sequence() run by the allocator's policy. With `budget` (bytes, > 0) it is
// run with budget - overhead bytes, as the GPU would give it: a
// caching allocator that runs short frees its cache and retries, so a
// step may fit below its unlimited reserved peak (reserved_peak is then
// the peak under that limit); runs_out says whether it failed all the same.
DeviceMemory device_memory(const TrainingStep& step, uint64_t budget = 0);

// The least device memory the step runs in (overhead included): the
// smallest GPU on which device_memory() does not run out, bisected to 2 MiB
// (the caching allocator's small-segment size) between the allocated peak and
// the unconstrained reserved peak. This is what "needs" means in every
// report, with or without --gpu, and the same figure whatever --gpu is. With
// `budget` it agrees with device_memory(step, budget).runs_out by
// construction: at most `budget` when the step runs there, more when not.
uint64_t least_device_bytes(const TrainingStep& step, uint64_t budget = 0);

}  // namespace gpumem::train
