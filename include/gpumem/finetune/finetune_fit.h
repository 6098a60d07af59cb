#pragma once
// What `gpumem finetune` answers around one step: whether it fits a GPU
// (on the device total, as `gpumem fit` decides), the longest sequence and
// the largest micro-batch that do, and the changes that would make a
// setting fit.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpumem/common/verdict.h"
#include "gpumem/finetune/finetune.h"
#include "gpumem/train/device_memory.h"
#include "gpumem/train/sharding.h"

namespace gpumem::finetune {

// One change to the settings and what the step then takes.
struct FinetuneChange {
  std::string what;  // "--checkpointing layers", "--method qlora", ...
  std::string cost;  // what it costs: recomputation, precision, steps
  uint64_t device_bytes = 0;
  bool fits = false;
};

// Data parallel over several GPUs, as the engines users run it:
// DDP, DeepSpeed ZeRO 1-3 (optimizer states offloaded to the CPU with
// `offload`), FSDP FULL_SHARD. --micro-batch is per GPU.
enum class Strategy : std::uint8_t { kDdp, kZero1, kZero2, kZero3, kFsdp };
const char* to_string(Strategy s);

struct FinetuneParallel {
  int gpus = 1;
  Strategy strategy = Strategy::kDdp;
  bool offload = false;
};

// One GPU's memory under the strategy: the trainable parameters' states as
// src/train/sharding.cpp plans them, plus the frozen base weights
// (replicated under DDP and ZeRO 1-2; under ZeRO-3 and FSDP sharded, with
// one layer's gathered), plus the CUDA context.
struct PerGpu {
  int gpus = 1;
  train::ShardingPlan plan;   // the trainable states and the activations
  uint64_t frozen_bytes = 0;  // the frozen weights this GPU holds
  uint64_t overhead_bytes = 0;
  uint64_t device_bytes = 0;  // plan + frozen + overhead
};

struct FinetunePlan {
  FinetuneStep step;
  train::DeviceMemory device;
  uint64_t gpu_bytes = 0;  // 0: no budget given
  Verdict verdict;         // the least device memory the step runs in (per GPU with several), against gpu_bytes
  std::optional<uint64_t> max_seq, max_micro_batch;
  bool max_seq_capped = false;          // the search stopped at max_position_embeddings
  std::vector<FinetuneChange> changes;  // when it does not fit: single changes, those that fit first
  std::optional<PerGpu> per_gpu;        // with more than one GPU; then `fits` is judged on it
};

// The step, and with `gpu_bytes` the answers. InputError as predict_finetune.
FinetunePlan plan_finetune(const llm::LlmModel& model, const FinetuneOptions& options, uint64_t gpu_bytes,
                           bool find_max_seq, bool find_max_batch, const FinetuneParallel& parallel = {});

// One GPU's share of `step` under `parallel` (gpus > 1).
PerGpu per_gpu(const llm::LlmModel& model, const FinetuneStep& step, const FinetuneParallel& parallel);

}  // namespace gpumem::finetune
