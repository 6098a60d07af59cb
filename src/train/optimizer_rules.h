#pragma once
// What each optimizer keeps per parameter between steps, and what its step
// allocates for a moment, as PyTorch's torch/optim (and bitsandbytes for
// 8-bit Adam) implement them.
#include <cstdint>
#include <string>
#include <vector>

#include "gpumem/train/step_graph.h"
#include "gpumem/train/training_step.h"

namespace gpumem::train {

struct StateTensor {
  std::string name;  // "momentum_buffer", "exp_avg", "exp_avg_sq", "step", "exp_avg_sq_row"...
  uint64_t bytes = 0;
};

// The states of `param` under `optimizer` (empty for plain SGD).
std::vector<StateTensor> optimizer_states(Optimizer optimizer, const Value& param);

// Bytes one parameter's update allocates for a moment in PyTorch's
// for-loop implementation (Adam: the square root of exp_avg_sq and its
// quotient, alive together).
uint64_t for_loop_temporary_bytes(Optimizer optimizer, const Value& param);

// Of those, what the update leaves bound to a Python local until the next
// parameter's update replaces it (Adam's denom).
uint64_t lingering_temporary_bytes(Optimizer optimizer, const Value& param);

// Bytes the multi-tensor (foreach) implementation allocates at once, given
// every trainable parameter: Adam's _foreach_sqrt of all exp_avg_sq, and
// before PyTorch 2.1 the denominator as a second list beside it.
uint64_t foreach_temporary_bytes(Optimizer optimizer, const std::vector<const Value*>& params, TorchVersion torch);

}  // namespace gpumem::train
