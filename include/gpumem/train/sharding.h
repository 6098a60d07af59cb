#pragma once
// Memory per GPU when a training step is spread over N GPUs, on the engines
// users already run: DeepSpeed ZeRO (stages 1-3, CPU offload), PyTorch FSDP
// (FULL_SHARD, SHARD_GRAD_OP) and pipeline stages (1F1B). Plain data in,
// plain data out; every figure is exact bytes unless its name says
// "parameters" (elements).
#include <cstdint>
#include <string>
#include <vector>

#include "gpumem/train/training_step.h"

namespace gpumem::train {

// The GPUs: DeepSpeed's estimators distinguish GPUs per node from nodes
// (CPU memory is per node, shared by that node's ranks).
struct Cluster {
  int gpus_per_node = 1;
  int nodes = 1;
  int total_gpus() const { return gpus_per_node * nodes; }
};

// ---- DeepSpeed's own estimators, reproduced -------------------------------
// estimate_zero2_model_states_mem_needs / estimate_zero3_model_states_mem_needs
// in deepspeed/runtime/zero/stage_1_and_2.py and stage3.py, documented at
// https://deepspeed.readthedocs.io/en/latest/memory.html. Model states only
// (no activations, no buffers). cpu_bytes is per node.
struct DeepSpeedEstimate {
  uint64_t cpu_bytes = 0;
  uint64_t gpu_bytes = 0;
};
DeepSpeedEstimate deepspeed_zero2_estimate(uint64_t total_params, const Cluster& cluster, bool offload_optimizer,
                                           double additional_buffer_factor = 1.5);
DeepSpeedEstimate deepspeed_zero3_estimate(uint64_t total_params, uint64_t largest_layer_params, const Cluster& cluster,
                                           bool offload_optimizer, bool offload_param, bool zero_init,
                                           double additional_buffer_factor = 1.5);
// A figure as DeepSpeed's estimator prints it: bytes / 2^30 with two
// decimals, "1.08" (its tables append "GB").
std::string deepspeed_gb(uint64_t bytes);

// ---- The detailed model ----------------------------------------------------
// One layer of a chain, for pipeline stages.
struct LayerStates {
  uint64_t parameters = 0;        // elements
  uint64_t activation_bytes = 0;  // kept for backward, per micro-batch
};

// What the plans are computed from. Bytes per parameter default to mixed
// precision with Adam: 16-bit weights and gradients, fp32 master weights,
// Adam's two fp32 moments (2 + 2 + 4 + 8 = 16 B per parameter); the engines
// also convert the gradients to the master's dtype for the update (another
// master_bytes_per_parameter, as DeepSpeed's estimators count: 18 B sharded
// under ZeRO, 16-bit weights aside). Activations are those of one GPU's
// micro-batch: predict the step at the per-GPU batch.
struct ModelStates {
  uint64_t parameters = 0;                // trainable, elements
  uint64_t largest_layer_parameters = 0;  // one module's own parameters (DeepSpeed's largest_layer_params)
  // The largest FSDP unit (what the auto-wrap policy wraps); 0: the largest layer.
  uint64_t wrap_unit_parameters = 0;
  // ZeRO-3 keeps parameters under stage3_param_persistence_threshold
  // gathered on every GPU: their total, elements (0 when not known).
  uint64_t persistent_parameters = 0;
  uint64_t activation_bytes = 0;            // per GPU at its most: inputs, saved activations, transients
  uint64_t weight_bytes_per_parameter = 2;  // the working copy forward and backward use
  uint64_t grad_bytes_per_parameter = 2;    // gradients as backward produces them
  uint64_t master_bytes_per_parameter = 4;  // fp32 master weights (0 without mixed precision)
  uint64_t optimizer_state_bytes_per_parameter = 8;
  std::vector<LayerStates> layers;  // the chain, if known: enables the pipeline plan
};

// Bytes per parameter of each kind for `optimizer` under `precision`
// (AMP/bf16: 16-bit working weights and gradients plus fp32 masters).
ModelStates model_states(Optimizer optimizer, Precision precision);
// From a predicted step: parameters, bytes per parameter, and the most
// activation bytes live at once (inputs, saved activations, transients).
ModelStates model_states(const TrainingStep& step, uint64_t largest_layer_parameters);

// DeepSpeed's communication buffers and their documented defaults
// (deepspeed/runtime/zero/config.py, DeepSpeed's config-json docs). Elements.
struct DeepSpeedBuffers {
  uint64_t reduce_bucket_size = 500'000'000;       // "reduce_bucket_size": 5e8
  uint64_t allgather_bucket_size = 500'000'000;    // "allgather_bucket_size": 5e8 (stages 1, 2)
  uint64_t prefetch_bucket_size = 50'000'000;      // "stage3_prefetch_bucket_size": 5e7
  uint64_t max_live_parameters = 1'000'000'000;    // "stage3_max_live_parameters": 1e9
  uint64_t param_persistence_threshold = 100'000;  // "stage3_param_persistence_threshold": 1e5
};

struct ZeroSetting {
  int stage = 0;  // 0: plain data parallel (DDP)
  bool offload_optimizer = false;
  bool offload_param = false;  // stage 3 only
};

enum class FsdpSharding : std::uint8_t { kFullShard, kShardGradOp };

// One strategy's figures for the cluster. Bytes per GPU unless named
// otherwise; the parts sum to gpu_bytes_per_gpu.
struct ShardingPlan {
  std::string engine;   // "ddp", "deepspeed", "fsdp", "pipeline"
  std::string setting;  // "zero3 offload_optimizer offload_param", "FULL_SHARD", "4 stages"
  ZeroSetting zero;     // deepspeed (and ddp: stage 0)
  FsdpSharding fsdp = FsdpSharding::kFullShard;
  uint64_t gpu_bytes_per_gpu = 0;  // the largest over the GPUs (pipeline: the largest stage)
  uint64_t cpu_bytes = 0;          // per node: offloaded states
  uint64_t weight_bytes = 0;       // working weights, sharded plus gathered
  uint64_t gradient_bytes = 0;
  uint64_t optimizer_bytes = 0;  // master weights and optimizer states
  uint64_t buffer_bytes = 0;     // communication buckets and prefetch
  uint64_t activation_bytes = 0;
  std::vector<int> stage_first_layer;  // pipeline: each stage's first layer
};

ShardingPlan ddp_plan(const ModelStates& model, const Cluster& cluster);
ShardingPlan zero_plan(const ModelStates& model, const Cluster& cluster, const ZeroSetting& zero,
                       const DeepSpeedBuffers& buffers = {});
ShardingPlan fsdp_plan(const ModelStates& model, const Cluster& cluster, FsdpSharding sharding);

// ---- Pipeline stages ---------------------------------------------------------
// A chain split into contiguous stages. Stage i (from 0) of N holds its
// layers' model states and, under 1F1B, N - i micro-batches of their
// activations; the split minimises the largest stage's bytes.
struct PipelineSplit {
  std::vector<int> first_layer;       // per stage, increasing, first_layer[0] == 0
  std::vector<uint64_t> stage_bytes;  // per stage
  uint64_t largest_stage_bytes = 0;
};
// Bytes of stage `stage` of `stages` holding layers [first, last).
uint64_t pipeline_stage_bytes(const std::vector<LayerStates>& layers, int first, int last, int stage, int stages,
                              uint64_t state_bytes_per_parameter);
// Exact (dynamic programming over the split points). Throws InputError
// when there are fewer layers than stages or stages < 1.
PipelineSplit split_pipeline(const std::vector<LayerStates>& layers, int stages, uint64_t state_bytes_per_parameter);
ShardingPlan pipeline_plan(const ModelStates& model, const Cluster& cluster);

// Every strategy for the cluster: ddp, ZeRO 1/2/3 with each offload option,
// FSDP both ways, and pipeline stages when model.layers has enough layers.
std::vector<ShardingPlan> sharding_plans(const ModelStates& model, const Cluster& cluster,
                                         const DeepSpeedBuffers& buffers = {});

}  // namespace gpumem::train
