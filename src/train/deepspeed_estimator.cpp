// DeepSpeed's own memory estimators, reproduced so that gpumem's figures can
// be set beside the ones DeepSpeed users already know. The formulas are those
// of estimate_zero2_model_states_mem_needs (deepspeed/runtime/zero/
// stage_1_and_2.py) and estimate_zero3_model_states_mem_needs
// (deepspeed/runtime/zero/stage3.py), described at
// https://deepspeed.readthedocs.io/en/latest/memory.html. They count model
// states only; the CPU figure is per node and includes what loading the
// model takes before it reaches the GPUs.
//
// DeepSpeed computes in Python floats and truncates with int(): the same
// operations in doubles, in the same order (it rounds after each), give the
// same bytes.
#include <algorithm>
#include <cstdio>

#include "gpumem/train/sharding.h"

namespace gpumem::train {

DeepSpeedEstimate deepspeed_zero2_estimate(uint64_t total_params, const Cluster& cluster, bool offload_optimizer,
                                           double additional_buffer_factor) {
  const double params = static_cast<double>(total_params);
  const double total_gpus = cluster.total_gpus();
  DeepSpeedEstimate e;
  if (offload_optimizer) {
    // GPU: the 16-bit weights; CPU: fp32 weights, gradients and Adam's two
    // moments (16 B), or the fp32 model each rank loads if that is more.
    e.gpu_bytes = 2 * total_params;
    e.cpu_bytes = static_cast<uint64_t>(params * std::max(4.0 * total_gpus, 16.0) * additional_buffer_factor);
  } else {
    // 16-bit weights on every GPU; 16-bit and fp32 gradients, fp32 master
    // weights and the two moments (2 + 4 + 4 + 8 = 18 B) partitioned. Older
    // DeepSpeed (and the table in its memory docs) used 4 + 16 / GPUs here.
    e.gpu_bytes = 2 * total_params + static_cast<uint64_t>(18.0 * params / total_gpus);
    e.cpu_bytes = static_cast<uint64_t>(params * 4 * cluster.gpus_per_node * additional_buffer_factor);
  }
  return e;
}

DeepSpeedEstimate deepspeed_zero3_estimate(uint64_t total_params, uint64_t largest_layer_params, const Cluster& cluster,
                                           bool offload_optimizer, bool offload_param, bool zero_init,
                                           double additional_buffer_factor) {
  const double params = static_cast<double>(total_params);
  const double total_gpus = cluster.total_gpus();
  const double gpus_factor = 1.0 / cluster.nodes;            // the node's share of the partitions
  const double per_node_load = 4.0 * cluster.gpus_per_node;  // each rank builds the fp32 model without zero.Init
  // The largest layer gathered in 16 bits, and its 16-bit gradients.
  const uint64_t largest_layer_memory = 4 * largest_layer_params;
  DeepSpeedEstimate e;
  // As DeepSpeed, offload_param counts only together with offload_optimizer.
  if (offload_optimizer && offload_param) {
    e.gpu_bytes = largest_layer_memory;
    // 16 B of fp32 states plus the 16-bit weights (18 B), on the CPU.
    e.cpu_bytes = static_cast<uint64_t>(zero_init ? params * 18 * gpus_factor * additional_buffer_factor
                                                  : params * std::max(per_node_load, 18 * gpus_factor) *
                                                        additional_buffer_factor);
  } else if (offload_optimizer) {
    e.gpu_bytes = largest_layer_memory + static_cast<uint64_t>(2.0 * params / total_gpus);
    e.cpu_bytes = static_cast<uint64_t>(zero_init ? params * 16 * gpus_factor * additional_buffer_factor
                                                  : params * std::max(per_node_load, 16 * gpus_factor) *
                                                        additional_buffer_factor);
  } else {
    e.gpu_bytes = largest_layer_memory + static_cast<uint64_t>(18.0 * params / total_gpus);
    // zero.Init builds one layer at a time; without it each rank builds all.
    const double loaded = zero_init ? static_cast<double>(largest_layer_params) : params;
    e.cpu_bytes = static_cast<uint64_t>(loaded * per_node_load * additional_buffer_factor);
  }
  return e;
}

std::string deepspeed_gb(uint64_t bytes) {
  // Python's f"{x:.2f}" and printf's "%.2f" both round the exact double.
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", static_cast<double>(bytes) / (1ull << 30));
  return text;
}

}  // namespace gpumem::train
