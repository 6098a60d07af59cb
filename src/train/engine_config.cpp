// The engines' own configuration for a plan, so that `gpumem fit --emit`
// hands users something they can run rather than figures to transcribe.
#include "gpumem/train/engine_config.h"
#include "common/bounded_json.h"

#include <nlohmann/json.hpp>

namespace gpumem::train {

std::string deepspeed_config_json(const ZeroSetting& zero, Precision precision, uint64_t micro_batch_per_gpu,
                                  const DeepSpeedBuffers& buffers, uint64_t accumulation_steps) {
  using nlohmann::json;
  json zo = {{"stage", zero.stage},
             {"contiguous_gradients", true},
             {"overlap_comm", true},
             {"reduce_bucket_size", buffers.reduce_bucket_size}};
  if (zero.stage <= 2) {
    zo["allgather_bucket_size"] = buffers.allgather_bucket_size;
  } else {
    zo["stage3_prefetch_bucket_size"] = buffers.prefetch_bucket_size;
    zo["stage3_max_live_parameters"] = buffers.max_live_parameters;
    zo["stage3_param_persistence_threshold"] = buffers.param_persistence_threshold;
  }
  // Pinned host memory is DeepSpeed's default for both offloads.
  if (zero.offload_optimizer) zo["offload_optimizer"] = {{"device", "cpu"}, {"pin_memory", true}};
  if (zero.stage == 3 && zero.offload_param) zo["offload_param"] = {{"device", "cpu"}, {"pin_memory", true}};

  json config = {{"train_micro_batch_size_per_gpu", micro_batch_per_gpu},
                 {"gradient_accumulation_steps", accumulation_steps},
                 {"zero_optimization", zo}};
  if (precision == Precision::kAmpBf16 || precision == Precision::kBf16) {
    config["bf16"] = {{"enabled", true}};
  } else if (precision == Precision::kAmpFp16) {
    // loss_scale 0: dynamic loss scaling.
    config["fp16"] = {{"enabled", true}, {"loss_scale", 0}, {"initial_scale_power", 16}};
  }
  return json_text(config, 2) + "\n";
}

std::string fsdp_snippet(FsdpSharding sharding, Precision precision, const FsdpWrap& wrap) {
  const bool by_class = !wrap.module_class.empty();
  std::string s =
      "import functools\n"
      "import torch\n"
      "from torch.distributed.fsdp import FullyShardedDataParallel, MixedPrecision, ShardingStrategy\n";
  s += by_class ? "from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy\n"
                : "from torch.distributed.fsdp.wrap import size_based_auto_wrap_policy\n";
  s += "\n";
  if (by_class) {
    s += "# " + wrap.module_class + ": import it from the module that defines the model's layers.\n";
    s += "auto_wrap_policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={" +
         wrap.module_class + "})\n";
  } else {
    s += "auto_wrap_policy = functools.partial(size_based_auto_wrap_policy, min_num_params=" +
         std::to_string(wrap.min_num_params) + ")\n";
  }
  const char* dtype = precision == Precision::kAmpFp16                                    ? "torch.float16"
                      : precision == Precision::kAmpBf16 || precision == Precision::kBf16 ? "torch.bfloat16"
                                                                                          : nullptr;
  if (dtype) {
    s += std::string("mixed_precision = MixedPrecision(param_dtype=") + dtype + ", reduce_dtype=" + dtype +
         ", buffer_dtype=" + dtype + ")\n";
  } else {
    s += "mixed_precision = None  # fp32\n";
  }
  s += "model = FullyShardedDataParallel(\n"
       "    model,\n"
       "    sharding_strategy=ShardingStrategy." +
       std::string(sharding == FsdpSharding::kFullShard ? "FULL_SHARD" : "SHARD_GRAD_OP") +
       ",\n"
       "    auto_wrap_policy=auto_wrap_policy,\n"
       "    mixed_precision=mixed_precision,\n"
       "    device_id=torch.cuda.current_device(),\n"
       ")\n";
  return s;
}

}  // namespace gpumem::train
