// plan_llm's answers checked against arithmetic done here, independently,
// and at their boundaries (the answer fits, one more does not).
#include <gtest/gtest.h>

#include "gpumem/common/error.h"
#include "gpumem/llm/llm_fit.h"
#include "test_paths.h"

namespace gpumem::llm {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

LlmModel config(const std::string& name) {
  return load_llm_model((test::source_dir() / "tests" / "data" / "llm" / "configs" / (name + ".json")).string());
}

LlmRequest request(uint64_t gpu, uint64_t context = 8192) {
  LlmRequest r;
  r.gpu_bytes = gpu;
  r.context = context;
  return r;
}

TEST(LlmFit, TheTotalIsItsParts) {
  const LlmPlan p = plan_llm(config("meta-llama-3-8b"), request(24 * kGiB));
  EXPECT_EQ(p.single.weights_bytes, 8'030'261'248u * 2);
  EXPECT_EQ(p.kv.bytes, 8192u * 131'072u);
  EXPECT_EQ(p.single.total(), p.single.weights_bytes + p.kv.bytes + p.forward.bytes + kDefaultOverheadBytes);
  EXPECT_TRUE(p.verdict.fits());
  uint64_t terms = 0;
  for (const auto& t : p.forward.terms) terms += t.bytes;
  EXPECT_EQ(terms, p.forward.bytes);
}

TEST(LlmFit, AttentionScoresDominateWithoutFlashAttention) {
  LlmRequest r = request(80 * kGiB);
  r.flash_attention = false;
  const LlmPlan p = plan_llm(config("meta-llama-3-8b"), r);
  EXPECT_EQ(p.forward.stage, "attention");
  // KQ: 8192 cached x 512 tokens x 32 heads x 4 B = 512 MiB.
  EXPECT_GE(p.forward.bytes, 512ull << 20);
  r.flash_attention = true;
  const LlmPlan fa = plan_llm(config("meta-llama-3-8b"), r);
  EXPECT_LT(fa.forward.bytes, p.forward.bytes);
  // With flash attention the logits of 512 tokens over 128,256 words lead.
  EXPECT_EQ(fa.forward.stage, "output");
}

TEST(LlmFit, LongestContextAndLargestBatchAreTheBoundary) {
  // 15 GiB for 14.96 GiB of bf16 weights (13.98 GiB on the GPU, the token
  // embeddings in host memory): a short context, memory-bound.
  LlmRequest r = request(15 * kGiB, 1024);
  const LlmModel m = config("meta-llama-3-8b");
  const LlmPlan p = plan_llm(m, r);
  ASSERT_GT(p.max_context, 0u);
  ASSERT_LT(p.max_context, 8192u);
  EXPECT_FALSE(p.max_context_capped);
  auto fits = [&](uint64_t context, uint64_t batch) {
    LlmRequest q = r;
    q.context = context;
    q.batch = batch;
    return plan_llm(m, q).verdict.fits();
  };
  EXPECT_TRUE(fits(p.max_context, 1));
  EXPECT_FALSE(fits(p.max_context + 1, 1));
  EXPECT_TRUE(fits(1024, p.max_batch));
  EXPECT_FALSE(fits(1024, p.max_batch + 1));
}

TEST(LlmFit, GpuLayersCountWhatEachLayerTakes) {
  // Every Llama 3 8B layer holds 218,112,000 bf16 parameters and, at 8192
  // tokens, 8192 x 4096 B of cache; the GPU also holds the overhead and one
  // forward's peak. The rest decides how many layers fit.
  const LlmModel m = config("meta-llama-3-8b");
  const LlmPlan p = plan_llm(m, request(8 * kGiB));
  const uint64_t per_layer = 218'112'000ull * 2 + 8192ull * 4096;
  const uint64_t room = 8 * kGiB - kDefaultOverheadBytes - p.forward.bytes;
  ASSERT_TRUE(p.offload.fits);
  EXPECT_EQ(p.offload.gpu_layers, room / per_layer);
  EXPECT_LE(p.offload.gpu.total(), 8 * kGiB);
  EXPECT_EQ(p.offload.gpu.weights_bytes + p.offload.gpu.kv_bytes + p.offload.host_bytes,
            p.single.weights_bytes + p.kv.bytes);
  EXPECT_FALSE(p.verdict.fits());
}

TEST(LlmFit, StreamingCostsTheStreamedBytesOverTheBandwidth) {
  const LlmPlan p = plan_llm(config("meta-llama-3-8b"), request(8 * kGiB));
  ASSERT_TRUE(p.streaming.possible);
  EXPECT_EQ(p.streaming.resident_layers + p.streaming.streamed_layers, 32u);
  EXPECT_EQ(p.streaming.streamed_bytes_per_token, p.streaming.streamed_layers * 218'112'000ull * 2);
  EXPECT_EQ(p.streaming.staging_bytes, 2 * 218'112'000ull * 2);
  EXPECT_DOUBLE_EQ(p.streaming.seconds_per_token, p.streaming.streamed_bytes_per_token / 25e9);
  EXPECT_LE(p.streaming.gpu.total(), 8 * kGiB);
}

TEST(LlmFit, TensorParallelMatchesVllmsWeightFigure) {
  // vLLM logged "Loading model weights took 13.9476 GB" (GiB) per GPU for
  // DeepSeek-R1-Distill-Qwen-14B at tensor parallel 2 (vllm-project/vllm#13061);
  // that figure also holds vLLM's own buffers, so within 2%.
  LlmRequest r = request(24 * kGiB, 4096);
  r.gpus = 2;
  const LlmPlan p = plan_llm(config("deepseek-r1-distill-qwen-14b"), r);
  ASSERT_TRUE(p.multi.has_value());
  ASSERT_TRUE(p.multi->tensor_parallel_valid);
  const double gib = p.multi->tensor_parallel.weights_bytes / double(kGiB);
  EXPECT_NEAR(gib, 13.9476, 13.9476 * 0.02);
  // 8 KV heads over 2 GPUs: half the cache on each.
  EXPECT_EQ(p.multi->tensor_parallel.kv_bytes, p.kv.bytes / 2);
  // Pipeline: 24 layers each, the embeddings on the first, the output on the last.
  EXPECT_EQ(p.multi->pipeline_layers, (std::vector<uint32_t>{24, 24}));
}

TEST(LlmFit, KvHeadsAreReplicatedPastOnePerGpu) {
  LlmRequest r = request(80 * kGiB);
  r.gpus = 16;
  const LlmPlan p = plan_llm(config("meta-llama-3-8b"), r);
  // 8 KV heads on 16 GPUs: one head (an eighth of the cache) on each.
  EXPECT_EQ(p.multi->tensor_parallel.kv_bytes, p.kv.bytes / 8);
}

TEST(LlmFit, QuantizationPricesMatricesAndKeepsVectorsInF32) {
  LlmRequest r = request(24 * kGiB);
  r.quant = "q8_0";
  const LlmPlan p = plan_llm(config("meta-llama-3-8b"), r);
  uint64_t vectors = 0, matrix_values = 0;
  for (const auto& t : p.model.tensors) {
    if (t.shape.size() == 1) {
      EXPECT_EQ(t.dtype, "F32");
      vectors += t.shape[0];
    } else {
      EXPECT_EQ(t.dtype, "Q8_0");
      matrix_values += t.shape[0] * t.shape[1];
    }
  }
  EXPECT_EQ(p.model.weight_bytes(), vectors * 4 + matrix_values / 32 * 34);
  r.quant = "nonsense";
  EXPECT_THROW(plan_llm(config("meta-llama-3-8b"), r), InputError);
}

TEST(LlmFit, RequestsThatCannotBeAnsweredSayWhy) {
  EXPECT_THROW(plan_llm(config("meta-llama-3-8b"), request(0)), InputError);
  LlmRequest r = request(24 * kGiB);
  r.kv_dtype = "int3";
  EXPECT_THROW(plan_llm(config("meta-llama-3-8b"), r), InputError);
}

}  // namespace
}  // namespace gpumem::llm
