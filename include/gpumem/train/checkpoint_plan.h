#pragma once
// Activation checkpointing chosen optimally: which modules to run under
// torch.utils.checkpoint so that a training step fits a budget while
// recomputing the fewest FLOPs.
//
// The modules considered are those of one depth of the module tree whose
// ops form one contiguous run (ResNet's blocks, a transformer's layers);
// the step without checkpointing gives, per allocation, which modules make,
// read and keep it. A dynamic program over the chain of modules then finds
// the set that minimises recomputation subject to the budget, exactly for
// that model of the step (each module's choice changes what stays live
// until backward reaches it), and the plan is checked by simulating the
// whole step with it.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "gpumem/train/training_step.h"

namespace gpumem::train {

struct ChainUnit {
  std::string module;  // "layer2.1"
  int first_op = 0, last_op = 0;
  uint64_t flops = 0;  // its forward: what checkpointing it recomputes
};

// The modules at `depth` (1: top-level children) whose ops are contiguous.
std::vector<ChainUnit> chain_units(const TrainingStep& step, int depth);

// The chain problem: units in order; checkpointing unit i costs cost[i]
// and changes the bytes kept until backward by `saving(prev, cur)` per unit
// (prev/cur: whether the previous and this unit are checkpointed); prefix
// constraint: while units 0..i are stored (forward done, backward not yet),
// the savings of units 0..i must reach need[i]. need_before is what the
// step needs with nothing stored (it must be <= 0 to fit at all).
struct ChainProblem {
  std::vector<uint64_t> cost;
  std::vector<std::array<int64_t, 4>> saving;  // index prev * 2 + cur
  std::vector<int64_t> need;
  int64_t need_before = 0;
  int64_t need_after = 0;  // after the last unit, with every unit stored
};

struct ChainSolution {
  bool feasible = false;
  std::vector<bool> checkpointed;
  uint64_t cost = 0;
  int64_t resolution = 1;  // bytes per step of savings the program told apart
};

// Dynamic program over (unit, savings, last choice), minimising the cost:
// exact when the savings' range has at most max(2^12, 2^22 / units)
// distinct values (up to 2^20),
// otherwise optimal for savings rounded down to `resolution` bytes (a
// plan it returns never saves less than claimed).
ChainSolution solve_chain(const ChainProblem& problem);

struct CheckpointPlan {
  bool fits = false;
  std::vector<std::string> modules;  // to wrap in torch.utils.checkpoint
  int depth = 0;                     // of the module tree the modules come from
  uint64_t peak_bytes = 0;           // the whole step simulated with the plan
  uint64_t recompute_flops = 0;
  double recompute_fraction = 0;  // of one forward pass
  bool optimal = false;           // proven for the chain model and confirmed by the simulation
  int64_t resolution = 1;         // bytes: the dynamic program's granularity of savings
  TrainingStep step;              // the step with the plan
};

// The plan for `model` under `options` within `budget` bytes.
CheckpointPlan plan_checkpointing(const Model& model, const TrainOptions& options, uint64_t budget);

}  // namespace gpumem::train
