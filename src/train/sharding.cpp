// Memory per GPU under data parallelism, DeepSpeed ZeRO and PyTorch FSDP,
// from the model's parameter count, the bytes each parameter costs and the
// activations of one GPU's micro-batch (activations are never sharded).
#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

#include "gpumem/train/sharding.h"

namespace gpumem::train {
namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// DeepSpeed and FSDP pad the flat parameters to equal partitions.
uint64_t partition(const ModelStates& m, const Cluster& c) {
  return ceil_div(m.parameters, static_cast<uint64_t>(std::max(1, c.total_gpus())));
}

void total_up(ShardingPlan& p) {
  p.gpu_bytes_per_gpu = p.weight_bytes + p.gradient_bytes + p.optimizer_bytes + p.buffer_bytes + p.activation_bytes;
}

// The most bytes live at once among allocations of the given categories.
uint64_t most_live(const TrainingStep& step, std::initializer_list<Category> categories) {
  std::vector<int64_t> delta(static_cast<size_t>(step.end_time) + 2, 0);
  for (const Allocation& a : step.allocations) {
    if (std::find(categories.begin(), categories.end(), a.category) == categories.end()) continue;
    delta[static_cast<size_t>(a.alloc_time)] += static_cast<int64_t>(a.bytes);
    delta[static_cast<size_t>(a.free_time)] -= static_cast<int64_t>(a.bytes);
  }
  int64_t live = 0, most = 0;
  for (const int64_t d : delta) most = std::max(most, live += d);
  return static_cast<uint64_t>(most);
}

}  // namespace

ModelStates model_states(Optimizer optimizer, Precision precision) {
  ModelStates m;
  const bool mixed = precision != Precision::kFp32;
  // The engines train 16-bit with fp32 master weights whichever 16-bit
  // precision was predicted; in fp32 the weights are their own masters.
  m.weight_bytes_per_parameter = mixed ? 2 : 4;
  m.grad_bytes_per_parameter = mixed ? 2 : 4;
  m.master_bytes_per_parameter = mixed ? 4 : 0;
  switch (optimizer) {
    case Optimizer::kSgd: m.optimizer_state_bytes_per_parameter = 0; break;
    case Optimizer::kSgdMomentum: m.optimizer_state_bytes_per_parameter = 4; break;
    case Optimizer::kAdam:
    case Optimizer::kAdamW:
    case Optimizer::kAdamW32bit: m.optimizer_state_bytes_per_parameter = 8; break;
    // Two one-byte moments (bitsandbytes; absmax per 256 values left out).
    case Optimizer::kAdam8bit: m.optimizer_state_bytes_per_parameter = 2; break;
    // Factored second moment: rows + columns per matrix, not per parameter.
    case Optimizer::kAdafactor: m.optimizer_state_bytes_per_parameter = 0; break;
  }
  return m;
}

ModelStates model_states(const TrainingStep& step, uint64_t largest_layer_parameters) {
  ModelStates m = model_states(step.options.optimizer, step.options.precision);
  m.parameters = step.trainable_parameters;
  m.largest_layer_parameters = largest_layer_parameters;
  m.activation_bytes = most_live(step, {Category::kInputs, Category::kSavedActivations, Category::kTransient});
  return m;
}

ShardingPlan ddp_plan(const ModelStates& m, const Cluster&) {
  ShardingPlan p;
  p.engine = "ddp";
  p.setting = "none";
  p.weight_bytes = m.weight_bytes_per_parameter * m.parameters;
  p.gradient_bytes = (m.grad_bytes_per_parameter + m.master_bytes_per_parameter) * m.parameters;
  p.optimizer_bytes = (m.master_bytes_per_parameter + m.optimizer_state_bytes_per_parameter) * m.parameters;
  // DDP's reducer copies the gradients into its buckets, which together
  // cover every parameter (gradient_as_bucket_view=False, the default).
  p.buffer_bytes = m.grad_bytes_per_parameter * m.parameters;
  p.activation_bytes = m.activation_bytes;
  total_up(p);
  return p;
}

ShardingPlan zero_plan(const ModelStates& m, const Cluster& c, const ZeroSetting& zero, const DeepSpeedBuffers& b) {
  if (zero.stage == 0) return ddp_plan(m, c);
  ShardingPlan p;
  p.engine = "deepspeed";
  p.zero = zero;
  p.setting = "zero" + std::to_string(zero.stage);
  if (zero.offload_optimizer) p.setting += " offload_optimizer";
  // DeepSpeed offloads parameters with or without the optimizer (its
  // estimator only prices them together), in stage 3 alone.
  const bool offload_param = zero.stage == 3 && zero.offload_param;
  if (offload_param) p.setting += " offload_param";
  p.zero.offload_param = offload_param;

  const uint64_t w = m.weight_bytes_per_parameter, g = m.grad_bytes_per_parameter;
  const uint64_t master = m.master_bytes_per_parameter;
  const uint64_t part = partition(m, c);
  // Per rank: fp32 gradients for the update, master weights, the states.
  const uint64_t optimizer_partition = (master + m.optimizer_state_bytes_per_parameter) * part;
  const uint64_t fp32_grad_partition = master * part;
  uint64_t cpu_per_rank = 0;
  if (zero.offload_optimizer) {
    cpu_per_rank += optimizer_partition + fp32_grad_partition;
  } else {
    p.optimizer_bytes = optimizer_partition;
    p.gradient_bytes = fp32_grad_partition;
  }

  const uint64_t reduce_bucket = g * std::min(b.reduce_bucket_size, m.parameters);
  if (zero.stage <= 2) {
    p.weight_bytes = w * m.parameters;
    if (zero.stage == 1) {
      p.gradient_bytes += g * m.parameters;  // every gradient, reduced into the partitions at the step
    } else if (zero.offload_optimizer) {
      cpu_per_rank += g * part;  // reduced straight into the CPU partition
    } else {
      p.gradient_bytes += g * part;
    }
    // The gradient bucket being reduced, and the chunk of the weights
    // gathered after the step.
    p.buffer_bytes = reduce_bucket + w * std::min(b.allgather_bucket_size, m.parameters);
  } else {
    // Stage 3: the layer running is gathered, with the next ones prefetched
    // (stage3_prefetch_bucket_size), up to stage3_max_live_parameters; small
    // parameters stay whole on every GPU (stage3_param_persistence_threshold).
    const uint64_t layer = m.largest_layer_parameters;
    const uint64_t live_room = b.max_live_parameters > layer ? b.max_live_parameters - layer : 0;
    const uint64_t prefetch =
        std::min({b.prefetch_bucket_size, m.parameters - std::min(layer, m.parameters), live_room});
    p.weight_bytes = w * (layer + m.persistent_parameters);
    if (offload_param) {
      cpu_per_rank += w * part;
    } else {
      p.weight_bytes += w * part;
    }
    // The gathered layer's gradients before reduce-scatter; the fp32
    // partition (gradient_accumulation_dtype) is counted above.
    p.gradient_bytes += g * layer;
    p.buffer_bytes = w * prefetch + reduce_bucket;
  }
  p.cpu_bytes = cpu_per_rank * static_cast<uint64_t>(c.gpus_per_node);
  p.activation_bytes = m.activation_bytes;
  total_up(p);
  return p;
}

ShardingPlan fsdp_plan(const ModelStates& m, const Cluster& c, FsdpSharding sharding) {
  ShardingPlan p;
  p.engine = "fsdp";
  p.fsdp = sharding;
  p.setting = sharding == FsdpSharding::kFullShard ? "FULL_SHARD" : "SHARD_GRAD_OP";
  const uint64_t part = partition(m, c);
  const uint64_t unit = m.wrap_unit_parameters ? m.wrap_unit_parameters : m.largest_layer_parameters;
  // FSDP shards the parameters in their own dtype (fp32 under
  // MixedPrecision, which casts only the gathered copy): the shard is the
  // master, and the sharded gradients come back in that dtype.
  const uint64_t keep = m.master_bytes_per_parameter ? m.master_bytes_per_parameter : m.weight_bytes_per_parameter;
  const uint64_t w = m.weight_bytes_per_parameter, g = m.grad_bytes_per_parameter;
  p.optimizer_bytes = m.optimizer_state_bytes_per_parameter * part;
  p.weight_bytes = keep * part;
  p.gradient_bytes = keep * part + g * unit;  // plus one unit's gradients before reduce-scatter
  if (sharding == FsdpSharding::kFullShard) {
    // One unit gathered, the next prefetched (BackwardPrefetch.BACKWARD_PRE).
    p.weight_bytes += 2 * w * unit;
  } else {
    // reshard_after_forward=False: every unit stays gathered until backward.
    p.weight_bytes += w * m.parameters;
  }
  p.activation_bytes = m.activation_bytes;
  total_up(p);
  return p;
}

std::vector<ShardingPlan> sharding_plans(const ModelStates& m, const Cluster& c, const DeepSpeedBuffers& b) {
  std::vector<ShardingPlan> plans{ddp_plan(m, c)};
  for (const ZeroSetting z : {ZeroSetting{1, false, false}, ZeroSetting{1, true, false}, ZeroSetting{2, false, false},
                              ZeroSetting{2, true, false}, ZeroSetting{3, false, false}, ZeroSetting{3, true, false},
                              ZeroSetting{3, true, true}}) {
    plans.push_back(zero_plan(m, c, z, b));
  }
  plans.push_back(fsdp_plan(m, c, FsdpSharding::kFullShard));
  plans.push_back(fsdp_plan(m, c, FsdpSharding::kShardGradOp));
  if (!m.layers.empty() && m.layers.size() >= static_cast<size_t>(c.total_gpus())) plans.push_back(pipeline_plan(m, c));
  return plans;
}

}  // namespace gpumem::train
