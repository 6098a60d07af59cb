#pragma once
// Configuration for the engines a sharding plan names, ready to use:
// DeepSpeed's ds_config.json, a PyTorch FSDP snippet and a checkpointing
// module.
#include <cstdint>
#include <string>
#include <vector>

#include "gpumem/train/sharding.h"
#include "gpumem/train/training_step.h"

namespace gpumem::train {

// A ds_config.json for `zero` (stage, offload_optimizer, offload_param) with
// the buffer sizes given and a bf16 section (kAmpBf16, kBf16), an fp16 one
// with dynamic loss scaling (kAmpFp16), or neither (kFp32).
std::string deepspeed_config_json(const ZeroSetting& zero, Precision precision, uint64_t micro_batch_per_gpu,
                                  const DeepSpeedBuffers& buffers = {}, uint64_t accumulation_steps = 1);

struct FsdpWrap {
  // The module class to wrap, e.g. "GPT2Block": transformer_auto_wrap_policy.
  std::string module_class;
  // Without a class: size_based_auto_wrap_policy with this min_num_params.
  uint64_t min_num_params = 100'000'000;
};

// A short Python snippet wrapping `model` in FullyShardedDataParallel with
// the ShardingStrategy, MixedPrecision for `precision` and the auto-wrap
// policy.
std::string fsdp_snippet(FsdpSharding sharding, Precision precision, const FsdpWrap& wrap);

// A Python module that applies a checkpoint plan to the model as it is:
// `from checkpoint import apply; apply(model)`. Each module ("layer2.1")
// runs its forward under torch.utils.checkpoint; each run of an
// nn.Sequential's children ("layer1.0..layer1.1") is checkpointed from that
// Sequential's forward. Parameter names and the model's code are unchanged.
// `about` is a comment line saying where the plan came from.
std::string checkpoint_snippet(const std::vector<std::string>& modules, const std::string& about);

}  // namespace gpumem::train
