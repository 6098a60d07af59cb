#pragma once
// Activation checkpointing chosen optimally: which modules, and which runs
// of sibling modules, to run under torch.utils.checkpoint so that a
// training step fits a budget while recomputing the fewest FLOPs.
//
// The modules considered are those of one depth of the module tree whose
// ops form one contiguous run (ResNet's stem and blocks, a transformer's
// layers). A checkpointed segment is one of them or a run of consecutive
// children of one nn.Sequential (siblings named by index: "layer1.0",
// "layer1.1") under a single checkpoint, as checkpoint_sequential wraps them:
// it keeps only the run's inputs, so a run saves the boundaries between
// its modules too, but recomputes the whole run at once in backward. The
// step without checkpointing gives, per allocation, which modules make,
// read and keep it; a dynamic program over the chain then finds the
// segments that minimise recomputation subject to the budget, exactly for
// that model of the step, and the plan is checked by simulating the whole
// step with it.
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gpumem/train/training_step.h"

namespace gpumem::train {

struct ChainUnit {
  std::string module;  // "layer2.1"
  std::string parent;  // the module it is a child of ("" at depth 1)
  int first_op = 0, last_op = 0;
  uint64_t flops = 0;  // its forward: what checkpointing it recomputes
};

// The modules at `depth` (1: top-level children) whose ops are contiguous.
std::vector<ChainUnit> chain_units(const TrainingStep& step, int depth);

// Whether `next` can join `previous`'s run under one checkpoint without
// editing the model's code: siblings whose ops follow one another with
// nothing in between, so that the parent's forward calls them one after the
// other, each once, the output of one the input of the next. The children of
// an nn.Sequential are; so is torchvision ResNet's stem (conv1, bn1, relu,
// maxpool). A Bottleneck's bn2 and conv3 are not: its shared relu runs
// between them (issue 46: "layer3.1.bn2..layer3.1.bn3" could not be wrapped).
bool wrappable_after(const ChainUnit& previous, const ChainUnit& next);

// The chain problem. Each unit runs normally or belongs to a checkpointed
// segment: a run of at most `max_segment` consecutive units, each of which
// after the first `joins_previous`. Checkpointing unit i costs cost[i].
// Savings are bytes kept until backward without checkpointing and not with
// it, counted at the last unit an allocation concerns:
//   normal[i][p]             unit i runs normally,
//   in_segment[i][j][p]      unit i is the j-th (from 0) of its segment,
// where p says whether the unit before (unit i-1, or the segment's first
// unit's predecessor) is checkpointed. Constraints, in bytes still to save:
//   need[c]            at moments when units 0..c-1 are stored with their
//                      savings (c = 0: before the first, the optimizer),
//   need_backward[i]   during unit i's backward pass, when only the units
//                      before its segment are (its segment is recomputed).
struct ChainProblem {
  std::vector<uint64_t> cost;
  std::vector<bool> joins_previous;  // empty: no unit joins (single-module segments)
  std::vector<std::array<int64_t, 2>> normal;
  std::vector<std::vector<std::array<int64_t, 2>>> in_segment;  // [i][j], j < max_segment
  std::vector<int64_t> need;                                    // units + 1
  std::vector<int64_t> need_backward;                           // units
  int max_segment = 1;
};

struct ChainSolution {
  bool feasible = false;
  std::vector<bool> checkpointed;
  std::vector<bool> starts_segment;  // a checkpointed unit that begins a segment
  uint64_t cost = 0;
  int64_t resolution = 1;  // bytes per step of savings the program told apart
};

// Dynamic program over (unit, savings, whether the last unit is
// checkpointed), minimising the cost: exact when the savings' range has at
// most max(2^12, min(2^10 (units + 1), 2^22 / (units + 1))) distinct values,
// otherwise optimal for savings rounded down to `resolution` bytes (a plan
// it returns never saves less than claimed). max_segment is at most 255.
ChainSolution solve_chain(const ChainProblem& problem);

// A constraint that does not bind (no moment of the step has that many
// units stored).
inline constexpr int64_t kNoNeed = std::numeric_limits<int64_t>::min() / 8;

struct CheckpointPlan {
  bool fits = false;
  // What to wrap in torch.utils.checkpoint, as `train --checkpoint` takes
  // it: a module ("layer2.1") or a run of an nn.Sequential's children under
  // one checkpoint ("layer1.0..layer1.1").
  std::vector<std::string> modules;
  int depth = 0;            // of the module tree the modules come from
  uint64_t peak_bytes = 0;  // the whole step simulated with the plan
  uint64_t recompute_flops = 0;
  double recompute_fraction = 0;  // of one forward pass
  bool optimal = false;           // proven for the chain model and confirmed by the simulation
  int64_t resolution = 1;         // bytes: the dynamic program's granularity of savings
  TrainingStep step;              // the step with the plan
};

// Whether a `--checkpoint` list wraps a run of modules ("layer1.0..layer1.1").
bool has_runs(const std::vector<std::string>& checkpoint);

// The plan for `model` under `options` within `budget` bytes.
CheckpointPlan plan_checkpointing(const Model& model, const TrainOptions& options, uint64_t budget);

}  // namespace gpumem::train
