// Memory per GPU under DeepSpeed ZeRO, FSDP and pipeline stages: DeepSpeed's
// published estimator figures recomputed, the detailed model against those
// estimators, partitioning that only ever helps, the pipeline split against
// brute force, and the emitted engine configurations.
#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gpumem/common/error.h"
#include "gpumem/train/engine_config.h"
#include "gpumem/train/sharding.h"
#include "train/recorded_steps.h"

namespace gpumem::train {
namespace {

struct Row {
  bool offload_param, offload_optimizer, zero_init;
  const char* cpu_gb;
  const char* gpu_gb;
};

void expect_zero3_table(uint64_t params, uint64_t largest, const Cluster& cluster, const std::vector<Row>& rows) {
  for (const Row& r : rows) {
    const DeepSpeedEstimate e =
        deepspeed_zero3_estimate(params, largest, cluster, r.offload_optimizer, r.offload_param, r.zero_init);
    SCOPED_TRACE(testing::Message() << "offload_param=" << r.offload_param
                                    << " offload_optimizer=" << r.offload_optimizer << " zero_init=" << r.zero_init);
    EXPECT_EQ(deepspeed_gb(e.cpu_bytes), r.cpu_gb);
    EXPECT_EQ(deepspeed_gb(e.gpu_bytes), r.gpu_gb);
  }
}

// estimate_zero3_model_states_mem_needs_all_live(t5-small, num_gpus_per_node=1,
// num_nodes=1), as printed in https://blog.csdn.net/u012327567/article/details/132278598
// ("SW: Model with 60M total params, 16M largest layer params"); the
// parameter counts are the issue's.
TEST(DeepSpeedEstimator, T5SmallZero3OneGpuAsPublished) {
  constexpr uint64_t kParams = 60'506'624, kLargest = 16'449'536;
  expect_zero3_table(kParams, kLargest, {1, 1},
                     {{true, true, true, "1.52", "0.06"},
                      {true, true, false, "1.52", "0.06"},
                      {false, true, true, "1.35", "0.17"},
                      {false, true, false, "1.35", "0.17"},
                      {false, false, true, "0.09", "1.08"},
                      {false, false, false, "0.34", "1.08"}});
  // The exact bytes behind those figures.
  EXPECT_EQ(deepspeed_zero3_estimate(kParams, kLargest, {1, 1}, true, true, true).gpu_bytes, 4 * kLargest);
  EXPECT_EQ(deepspeed_zero3_estimate(kParams, kLargest, {1, 1}, true, false, true).gpu_bytes,
            4 * kLargest + 2 * kParams);
  EXPECT_EQ(deepspeed_zero3_estimate(kParams, kLargest, {1, 1}, false, false, true).gpu_bytes,
            4 * kLargest + 18 * kParams);
  EXPECT_EQ(deepspeed_zero3_estimate(kParams, kLargest, {1, 1}, true, true, true).cpu_bytes, 27 * kParams);
  EXPECT_EQ(deepspeed_zero3_estimate(kParams, kLargest, {1, 1}, false, false, true).cpu_bytes, 6 * kLargest);
}

// DeepSpeed's memory docs (docs/code-docs/source/memory.rst,
// https://deepspeed.readthedocs.io/en/latest/memory.html): t5-3b "cold",
// total_params=2851e6, largest_layer_params=32e6, 1 node with 8 GPUs.
TEST(DeepSpeedEstimator, T5_3bZero3EightGpusAsDocumented) {
  expect_zero3_table(2'851'000'000, 32'000'000, {8, 1},
                     {{true, true, true, "71.69", "0.12"},
                      {true, true, false, "127.45", "0.12"},
                      {false, true, true, "63.72", "0.78"},
                      {false, true, false, "127.45", "0.78"},
                      {false, false, true, "1.43", "6.09"},
                      {false, false, false, "127.45", "6.09"}});
}

TEST(DeepSpeedEstimator, T5_3bZero2EightGpus) {
  constexpr uint64_t kParams = 2'851'000'000;
  const DeepSpeedEstimate offload = deepspeed_zero2_estimate(kParams, {8, 1}, true);
  EXPECT_EQ(deepspeed_gb(offload.cpu_bytes), "127.45");  // as documented
  EXPECT_EQ(deepspeed_gb(offload.gpu_bytes), "5.31");
  const DeepSpeedEstimate none = deepspeed_zero2_estimate(kParams, {8, 1}, false);
  EXPECT_EQ(deepspeed_gb(none.cpu_bytes), "127.45");  // as documented
  // The docs' 15.93GB is the older formula (4 + 16 / GPUs bytes per
  // parameter); DeepSpeed's code now counts 2 + 18 / GPUs.
  EXPECT_EQ(none.gpu_bytes, 2 * kParams + 18 * kParams / 8);
  EXPECT_EQ(deepspeed_gb(none.gpu_bytes), "11.28");
}

TEST(DeepSpeedEstimator, NodesShareTheCpuPartitions) {
  // gpus_factor = 1 / num_nodes: two nodes each hold half the offloaded states.
  const auto one = deepspeed_zero3_estimate(1'000'000, 10'000, {4, 1}, true, true, true);
  const auto two = deepspeed_zero3_estimate(1'000'000, 10'000, {4, 2}, true, true, true);
  EXPECT_EQ(one.cpu_bytes, 27'000'000u);
  EXPECT_EQ(two.cpu_bytes, 13'500'000u);
  EXPECT_EQ(one.gpu_bytes, two.gpu_bytes);
}

ModelStates mixed_adam(uint64_t params, uint64_t largest) {
  ModelStates m = model_states(Optimizer::kAdamW, Precision::kAmpBf16);
  m.parameters = params;
  m.largest_layer_parameters = largest;
  return m;
}

// Without buffers or activations, the detailed model counts what
// DeepSpeed's estimators count, byte for byte.
TEST(ZeroPlan, ModelStatesMatchDeepSpeedsEstimator) {
  constexpr uint64_t kParams = 8'000'000, kLargest = 400'000;
  const ModelStates m = mixed_adam(kParams, kLargest);
  const DeepSpeedBuffers none{0, 0, 0, 0, 0};
  for (const int gpus : {1, 2, 4, 8}) {
    const Cluster c{gpus, 1};
    for (const bool offload : {false, true}) {
      SCOPED_TRACE(testing::Message() << gpus << " GPUs, offload " << offload);
      EXPECT_EQ(zero_plan(m, c, {2, offload, false}, none).gpu_bytes_per_gpu,
                deepspeed_zero2_estimate(kParams, c, offload).gpu_bytes);
      EXPECT_EQ(zero_plan(m, c, {3, offload, false}, none).gpu_bytes_per_gpu,
                deepspeed_zero3_estimate(kParams, kLargest, c, offload, false, true).gpu_bytes);
    }
    EXPECT_EQ(zero_plan(m, c, {3, true, true}, none).gpu_bytes_per_gpu,
              deepspeed_zero3_estimate(kParams, kLargest, c, true, true, true).gpu_bytes);
  }
}

uint64_t model_state_bytes(const ShardingPlan& p) { return p.weight_bytes + p.gradient_bytes + p.optimizer_bytes; }

TEST(ZeroPlan, EachStageAndEachGpuOnlyHelps) {
  const ModelStates m = mixed_adam(1'000'000'000, 50'000'000);
  for (const int gpus : {2, 4, 8, 64}) {
    const Cluster c{gpus, 1};
    uint64_t previous = model_state_bytes(ddp_plan(m, c));
    for (int stage = 1; stage <= 3; ++stage) {
      const uint64_t bytes = model_state_bytes(zero_plan(m, c, {stage, false, false}));
      EXPECT_LT(bytes, previous) << "stage " << stage << ", " << gpus << " GPUs";
      previous = bytes;
    }
  }
  for (int stage = 1; stage <= 3; ++stage) {
    uint64_t previous = UINT64_MAX;
    for (const int gpus : {1, 2, 4, 8, 64}) {
      const uint64_t bytes = model_state_bytes(zero_plan(m, {gpus, 1}, {stage, false, false}));
      EXPECT_LT(bytes, previous) << "stage " << stage << ", " << gpus << " GPUs";
      previous = bytes;
    }
    // Offloading the optimizer moves bytes from the GPU to the CPU.
    const ShardingPlan kept = zero_plan(m, {8, 1}, {stage, false, false});
    const ShardingPlan moved = zero_plan(m, {8, 1}, {stage, true, false});
    EXPECT_LT(moved.gpu_bytes_per_gpu, kept.gpu_bytes_per_gpu);
    EXPECT_GT(moved.cpu_bytes, kept.cpu_bytes);
  }
  const ShardingPlan params_moved = zero_plan(m, {8, 1}, {3, true, true});
  EXPECT_LT(params_moved.gpu_bytes_per_gpu, zero_plan(m, {8, 1}, {3, true, false}).gpu_bytes_per_gpu);
  // Parameters alone, too; only stage 3 partitions them, so only it offloads them.
  const ShardingPlan params_only = zero_plan(m, {8, 1}, {3, false, true});
  EXPECT_EQ(params_only.setting, "zero3 offload_param");
  EXPECT_EQ(params_only.cpu_bytes, 8 * 2 * 125'000'000ull);
  EXPECT_EQ(zero_plan(m, {8, 1}, {2, false, true}).setting, "zero2");
}

TEST(ZeroPlan, BuffersUseDeepSpeedsDefaultsCappedByTheModel) {
  const ModelStates m = mixed_adam(1'000'000'000, 50'000'000);
  // Stage 2: a 5e8-element gradient bucket and a 5e8-element allgather, 16-bit.
  EXPECT_EQ(zero_plan(m, {8, 1}, {2, false, false}).buffer_bytes, 2 * 500'000'000ull + 2 * 500'000'000ull);
  // Stage 3: 5e7 prefetched elements and the gradient bucket.
  EXPECT_EQ(zero_plan(m, {8, 1}, {3, false, false}).buffer_bytes, 2 * 50'000'000ull + 2 * 500'000'000ull);
  // A small model never fills a bucket.
  const ModelStates small = mixed_adam(1'000, 100);
  EXPECT_EQ(zero_plan(small, {8, 1}, {2, false, false}).buffer_bytes, 2 * 1'000u + 2 * 1'000u);
}

TEST(FsdpPlan, FullShardGathersOneUnitShardGradOpKeepsAll) {
  ModelStates m = mixed_adam(1'000'000'000, 50'000'000);
  m.activation_bytes = 7;
  const ShardingPlan full = fsdp_plan(m, {8, 1}, FsdpSharding::kFullShard);
  const ShardingPlan grad_op = fsdp_plan(m, {8, 1}, FsdpSharding::kShardGradOp);
  const uint64_t part = 125'000'000;
  // fp32 shards (the masters), fp32 sharded gradients, Adam's moments.
  EXPECT_EQ(full.weight_bytes, 4 * part + 2 * 2 * 50'000'000ull);
  EXPECT_EQ(grad_op.weight_bytes, 4 * part + 2 * 1'000'000'000ull);
  EXPECT_EQ(full.gradient_bytes, 4 * part + 2 * 50'000'000ull);
  EXPECT_EQ(full.optimizer_bytes, 8 * part);
  EXPECT_EQ(full.gpu_bytes_per_gpu, full.weight_bytes + full.gradient_bytes + full.optimizer_bytes + 7);
  EXPECT_LT(full.gpu_bytes_per_gpu, grad_op.gpu_bytes_per_gpu);
  // A wrap unit larger than one layer gathers more.
  m.wrap_unit_parameters = 100'000'000;
  EXPECT_GT(fsdp_plan(m, {8, 1}, FsdpSharding::kFullShard).gpu_bytes_per_gpu, full.gpu_bytes_per_gpu);
}

// Every split of `layers` into `stages` non-empty contiguous stages.
uint64_t brute_force(const std::vector<LayerStates>& layers, int stages, uint64_t per_parameter) {
  uint64_t best = UINT64_MAX;
  std::vector<int> firsts;
  const int n = static_cast<int>(layers.size());
  std::function<void(int, int)> place = [&](int stage, int first) {
    firsts.push_back(first);
    if (stage == stages - 1) {
      uint64_t worst = 0;
      for (int s = 0; s < stages; ++s) {
        const int last = s + 1 < stages ? firsts[static_cast<size_t>(s) + 1] : n;
        worst = std::max(worst,
                         pipeline_stage_bytes(layers, firsts[static_cast<size_t>(s)], last, s, stages, per_parameter));
      }
      best = std::min(best, worst);
    } else {
      for (int next = first + 1; next <= n - (stages - stage - 1); ++next) place(stage + 1, next);
    }
    firsts.pop_back();
  };
  place(0, 0);
  return best;
}

TEST(PipelineSplit, MatchesBruteForceOnRandomChains) {
  std::mt19937_64 rng(12);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 9);
    const int stages = 1 + static_cast<int>(rng() % std::min(n, 5));
    std::vector<LayerStates> layers(static_cast<size_t>(n));
    for (LayerStates& l : layers) l = {rng() % 1000, rng() % 20000};
    const uint64_t per_parameter = 1 + rng() % 20;
    const PipelineSplit split = split_pipeline(layers, stages, per_parameter);
    ASSERT_EQ(split.largest_stage_bytes, brute_force(layers, stages, per_parameter)) << "trial " << trial;
    ASSERT_EQ(split.first_layer.size(), static_cast<size_t>(stages));
    EXPECT_EQ(split.first_layer.front(), 0);
    EXPECT_TRUE(std::is_sorted(split.first_layer.begin(), split.first_layer.end()));
    EXPECT_EQ(std::adjacent_find(split.first_layer.begin(), split.first_layer.end()), split.first_layer.end());
    EXPECT_EQ(*std::max_element(split.stage_bytes.begin(), split.stage_bytes.end()), split.largest_stage_bytes);
  }
}

TEST(PipelineSplit, TheFirstStageKeepsTheMostMicroBatches) {
  // Four equal layers, activations only: under 1F1B the first stage keeps 2
  // micro-batches, the second 1, so the second stage takes more layers.
  const std::vector<LayerStates> layers(4, {0, 100});
  const PipelineSplit split = split_pipeline(layers, 2, 16);
  EXPECT_EQ(split.first_layer, (std::vector<int>{0, 1}));
  EXPECT_EQ(split.stage_bytes, (std::vector<uint64_t>{200, 300}));
  EXPECT_THROW(split_pipeline(layers, 5, 16), InputError);
}

TEST(ShardingPlans, EveryStrategyOnceWithThePipelineWhenLayersAreKnown) {
  ModelStates m = mixed_adam(4'000'000, 1'000'000);
  EXPECT_EQ(sharding_plans(m, {4, 1}).size(), 10u);
  m.layers.assign(8, {500'000, 1'000});
  const auto plans = sharding_plans(m, {4, 1});
  ASSERT_EQ(plans.size(), 11u);
  EXPECT_EQ(plans.back().engine, "pipeline");
  EXPECT_EQ(plans.back().stage_first_layer.size(), 4u);
  for (const ShardingPlan& p : plans) {
    EXPECT_EQ(p.gpu_bytes_per_gpu,
              p.weight_bytes + p.gradient_bytes + p.optimizer_bytes + p.buffer_bytes + p.activation_bytes)
        << p.engine << " " << p.setting;
  }
}

TEST(ShardingPlans, ActivationsComeFromThePredictedStep) {
  const TrainingStep step =
      predict_training_step(test::train_data("transformer_bf16.onnx"), test::recorded_steps()[4].options);
  const ModelStates m = model_states(step, 1000);
  EXPECT_EQ(m.parameters, step.trainable_parameters);
  EXPECT_EQ(m.weight_bytes_per_parameter, 2u);
  EXPECT_GT(m.activation_bytes, 0u);
  EXPECT_LE(m.activation_bytes, step.peak_bytes);
  EXPECT_GE(m.activation_bytes, step.breakdown[static_cast<int>(Category::kSavedActivations)]);
}

TEST(EngineConfig, DeepSpeedJsonParsesWithTheStageAndOffloads) {
  for (int stage = 1; stage <= 3; ++stage) {
    const auto config = nlohmann::json::parse(deepspeed_config_json({stage, true, stage == 3}, Precision::kAmpBf16, 8));
    EXPECT_EQ(config["zero_optimization"]["stage"], stage);
    EXPECT_EQ(config["zero_optimization"]["offload_optimizer"]["device"], "cpu");
    EXPECT_EQ(config["zero_optimization"].contains("offload_param"), stage == 3);
    EXPECT_EQ(config["zero_optimization"].contains("stage3_prefetch_bucket_size"), stage == 3);
    EXPECT_EQ(config["bf16"]["enabled"], true);
    EXPECT_EQ(config["train_micro_batch_size_per_gpu"], 8);
  }
  const auto fp16 = nlohmann::json::parse(deepspeed_config_json({2, false, false}, Precision::kAmpFp16, 1));
  EXPECT_EQ(fp16["fp16"]["enabled"], true);
  EXPECT_FALSE(fp16.contains("bf16"));
  EXPECT_FALSE(fp16["zero_optimization"].contains("offload_optimizer"));
}

TEST(EngineConfig, FsdpSnippetNamesTheStrategyAndWrapPolicy) {
  const std::string by_class = fsdp_snippet(FsdpSharding::kFullShard, Precision::kAmpBf16, {"GPT2Block"});
  EXPECT_NE(by_class.find("ShardingStrategy.FULL_SHARD"), std::string::npos);
  EXPECT_NE(by_class.find("transformer_layer_cls={GPT2Block}"), std::string::npos);
  EXPECT_NE(by_class.find("MixedPrecision(param_dtype=torch.bfloat16"), std::string::npos);
  const std::string by_size = fsdp_snippet(FsdpSharding::kShardGradOp, Precision::kFp32, {"", 1'000'000});
  EXPECT_NE(by_size.find("ShardingStrategy.SHARD_GRAD_OP"), std::string::npos);
  EXPECT_NE(by_size.find("size_based_auto_wrap_policy, min_num_params=1000000"), std::string::npos);
}

}  // namespace
}  // namespace gpumem::train
