#pragma once
// `gpumem fit`: make a training step fit a memory budget, by the cheapest
// changes first (the optimizer's for-loop implementation, bf16 autocast,
// 8-bit Adam, activation checkpointing), and find the largest batch that
// fits.
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gpumem/common/verdict.h"
#include "gpumem/train/checkpoint_plan.h"
#include "gpumem/train/device_memory.h"
#include "gpumem/train/sharding.h"
#include "gpumem/train/training_step.h"

namespace gpumem::train {

// What fit may change, cheapest first. --keep names those the user cannot.
enum class Lever : std::uint8_t {
  kOptimizer,   // foreach off, zero_grad(set_to_none=True), 8-bit Adam states
  kPrecision,   // fp32 -> bf16 autocast
  kCheckpoint,  // activation checkpointing
  kBatch,       // a smaller micro-batch with gradient accumulation (the same effective batch)
  kOffload,     // optimizer states (and parameters) in CPU memory: DeepSpeed ZeRO-Offload
};
const char* to_string(Lever lever);
// "optimizer" -> kOptimizer; nullopt for an unknown name.
std::optional<Lever> parse_lever(const std::string& name);

struct FitRequest {
  // The step as the user runs it (--batch in options.model), with the
  // allocator and overhead that decide what the device holds.
  TrainOptions options;
  uint64_t budget = 0;     // device bytes per GPU: the step's reserved peak + overhead must fit
  std::set<Lever> keep;    // levers fit must not pull
  bool max_batch = false;  // search the largest batch (on the model's batch axis)
  int gpus = 1;            // > 1: memory per GPU under DeepSpeed, FSDP and pipeline stages
  // On one GPU, whether fit may move optimizer states and parameters to
  // CPU memory (DeepSpeed ZeRO-Offload). Off unless asked: a user who names
  // one GPU asks what that GPU can do with the code they run.
  bool offload = false;
};

struct FitChange {
  std::string change;        // "--precision amp-bf16", "--optimizer adam8bit", "checkpoint 4 modules"
  uint64_t peak_before = 0;  // what the device needs (least_device_bytes) before and after
  uint64_t peak_after = 0;
  std::string cost;  // in words: what it costs
};

struct FitAttempt {
  int64_t batch = 0;
  bool fits = false;
  uint64_t peak_bytes = 0;  // device bytes after the changes
};

struct FitResult {
  bool fits = false;
  int gpus = 1;       // as requested
  int64_t batch = 0;  // the (micro-)batch the figures are for (the largest that fits with --max-batch)
  // Micro-batches per optimizer step: batch x accumulation_steps is the
  // batch asked for. 1 unless fit lowered the micro-batch.
  int64_t accumulation_steps = 1;
  uint64_t budget = 0;
  // What the decision is made on: device.device_bytes() (the reserved peak
  // under the allocator + the overhead), with the changes.
  uint64_t predicted_peak = 0;
  DeviceMemory device;  // the chosen step on the device
  // The answer (common/verdict.h): the least device memory the chosen step
  // runs in (least_device_bytes, or a strategy's bytes per GPU + the
  // overhead) against the budget.
  Verdict verdict;
  TrainingStep step;               // the chosen step (fit --trace writes it)
  TrainOptions options;            // as chosen: precision, optimizer, checkpoint modules
  CheckpointPlan checkpoint;       // empty modules when none is needed
  std::vector<FitChange> changes;  // in the order applied
  // The levers fit was free to pull: all but --keep's, and offload on one
  // GPU only when asked for.
  std::vector<Lever> levers;
  // When it does not fit: why, in one sentence (what alone exceeds the
  // budget), and what would come closer.
  std::string why_not;
  // --max-batch: the largest batch that fits without checkpointing, and
  // the least device memory the next batch needs with the chosen changes
  // (more than the budget: it does not fit).
  std::optional<int64_t> max_batch_without_checkpointing;
  std::optional<uint64_t> next_batch_peak;
  std::vector<FitAttempt> batches_tried;
  // --gpus: each strategy's memory per GPU for the step as chosen, without
  // the overhead; a strategy fits when gpu_bytes_per_gpu + device.overhead
  // <= budget. Before checkpointing unless per_gpu_checkpointed.
  std::vector<ShardingPlan> per_gpu;
  bool per_gpu_checkpointed = false;
  // --gpus, when a full replica per GPU does not fit: the strategy taken,
  // the cheapest in communication that fits (predicted_peak is then its
  // bytes per GPU + the overhead); none when one GPU's step fits or none does.
  std::optional<ShardingPlan> sharding;
};

// Parameters, largest module, layers and activations of a predicted step,
// as the sharding estimates take them.
ModelStates model_states_of(const TrainingStep& step);

FitResult fit_training(const std::string& path, const FitRequest& request);

}  // namespace gpumem::train
