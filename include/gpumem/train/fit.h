#pragma once
// `gpumem fit`: make a training step fit a memory budget, by the cheapest
// changes first (bf16 autocast, 8-bit Adam, activation checkpointing), and
// find the largest batch that fits.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpumem/train/checkpoint_plan.h"
#include "gpumem/train/sharding.h"
#include "gpumem/train/training_step.h"

namespace gpumem::train {

struct FitRequest {
  TrainOptions options;         // the step as the user runs it (--batch in options.model)
  uint64_t budget = 0;          // bytes per GPU
  bool precision_auto = false;  // may change precision and optimizer
  bool max_batch = false;       // search the largest batch (the first input dimension)
  int gpus = 1;                 // > 1: memory per GPU under DeepSpeed, FSDP and pipeline stages
};

struct FitChange {
  std::string change;  // "--precision amp-bf16", "--optimizer adam8bit", "checkpoint 4 modules"
  uint64_t peak_before = 0;
  uint64_t peak_after = 0;
  std::string cost;  // in words: what it costs
};

struct FitAttempt {
  int64_t batch = 0;
  bool fits = false;
  uint64_t peak_bytes = 0;  // after the changes
};

struct FitResult {
  bool fits = false;
  int64_t batch = 0;  // the batch the result is for (the largest that fits with --max-batch)
  uint64_t budget = 0;
  uint64_t predicted_peak = 0;
  TrainOptions options;            // as chosen: precision, optimizer, checkpoint modules
  CheckpointPlan checkpoint;       // empty modules when none is needed
  std::vector<FitChange> changes;  // in the order applied
  // --max-batch: the largest batch that fits without checkpointing, and
  // the next batch's predicted peak with the chosen changes (it does not fit).
  std::optional<int64_t> max_batch_without_checkpointing;
  std::optional<uint64_t> next_batch_peak;
  std::vector<FitAttempt> batches_tried;
  // --gpus: each strategy's memory per GPU for the step as chosen (before
  // checkpointing, which multiplies with any of them).
  std::vector<ShardingPlan> per_gpu;
};

// Parameters, largest module, layers and activations of a predicted step,
// as the sharding estimates take them.
ModelStates model_states_of(const TrainingStep& step);

FitResult fit_training(const std::string& path, const FitRequest& request);

}  // namespace gpumem::train
