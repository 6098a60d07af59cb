// The quantized formats vLLM serves (llm/vllm_quant.h): each matrix of the
// blocks priced as the quantizer lays it out, the rest left as it was.
#include <gtest/gtest.h>

#include "gpumem/llm/llm_model.h"
#include "gpumem/llm/vllm_quant.h"
#include "test_paths.h"

namespace gpumem::llm {
namespace {

LlmModel llama3_8b_config() {
  return load_llm_model(
      (gpumem::test::source_dir() / "tests" / "data" / "llm" / "configs" / "meta-llama-3-8b.json").string());
}

const LlmTensor& tensor_named(const LlmModel& m, const std::string& name) {
  for (const auto& t : m.tensors)
    if (t.name == name) return t;
  ADD_FAILURE() << name;
  return m.tensors.front();
}

TEST(VllmQuant, EachMatrixIsTheQuantizersLayout) {
  const LlmModel m = llama3_8b_config();
  // blk.0.attn_q.weight: 4096 in x 4096 out.
  const auto& q = tensor_named(m, "blk.0.attn_q.weight");
  ASSERT_EQ(q.shape, (std::vector<uint64_t>{4096, 4096}));
  const uint64_t n = 4096ull * 4096;
  // AWQ: qweight int32 [4096, 512] + qzeros int32 [32, 512] + fp16 scales [32, 4096].
  const uint64_t awq = 4096ull * 512 * 4 + 32ull * 512 * 4 + 32ull * 4096 * 2;
  EXPECT_EQ(tensor_named(vllm_quantized(m, *vllm_quant_named("awq")), q.name).bytes, awq);
  // GPTQ: the same three plus g_idx int32 [4096].
  EXPECT_EQ(tensor_named(vllm_quantized(m, *vllm_quant_named("gptq")), q.name).bytes, awq + 4096 * 4);
  // FP8: a byte a weight, a weight scale and an input scale.
  EXPECT_EQ(tensor_named(vllm_quantized(m, *vllm_quant_named("fp8")), q.name).bytes, n + 8);
  // bitsandbytes NF4: half a byte a weight, an fp32 absmax per 64.
  EXPECT_EQ(tensor_named(vllm_quantized(m, *vllm_quant_named("bitsandbytes")), q.name).bytes, n / 2 + n / 64 * 4);
}

TEST(VllmQuant, EmbeddingsOutputAndNormsKeepTheirType) {
  const LlmModel m = llama3_8b_config();
  for (const auto& f : vllm_quant_formats()) {
    const LlmModel q = vllm_quantized(m, f);
    for (const char* kept : {"token_embd.weight", "output.weight", "blk.0.attn_norm.weight", "output_norm.weight"}) {
      EXPECT_EQ(tensor_named(q, kept).bytes, tensor_named(m, kept).bytes) << f.name << " " << kept;
      EXPECT_EQ(tensor_named(q, kept).dtype, tensor_named(m, kept).dtype) << f.name << " " << kept;
    }
    EXPECT_LT(q.weight_bytes(), m.weight_bytes()) << f.name;
  }
  EXPECT_EQ(vllm_quant_named("q4_k_m"), nullptr);
}

}  // namespace
}  // namespace gpumem::llm
