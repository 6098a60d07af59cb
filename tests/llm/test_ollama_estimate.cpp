// `gpumem llm --engine ollama` restates ollama's own estimate (GraphSize in
// fs/ggml/ggml.go, v0.12.10). Checked against what ollama logged for a
// Llama 70B shape (ollama/ollama#9181, 2025-02-18: "memory.required.kv=19.5
// GiB ... memory.graph.full=8.2 GiB memory.graph.partial=8.2 GiB" at
// --ctx-size 64000 --batch-size 512 --parallel 1 on four GPUs, where
// ollama takes the partial-offload graph for both), and term by term.
#include <gtest/gtest.h>

#include "gpumem/llm/engines.h"
#include "gpumem/llm/ollama_estimate.h"

namespace gpumem::llm {
namespace {

LlmModel llama_70b() {
  LlmModel m;
  m.architecture = "llama";
  m.n_layer = 80;
  m.n_embd = 8192;
  m.n_head = 64;
  m.n_head_kv = 8;
  m.head_dim_k = m.head_dim_v = 128;
  m.n_ff = 28672;
  m.n_vocab = 128256;
  return m;
}

// ollama prints GiB with one decimal (format.HumanBytes2).
double gib(uint64_t bytes) { return static_cast<double>(bytes) / (1ull << 30); }

TEST(OllamaEstimate, ReproducesOllamasLogForLlama70BAt64kTokens) {
  const OllamaEstimate e = ollama_estimate(llama_70b(), 64000, 512, 1, "f16");
  EXPECT_NEAR(gib(e.kv_bytes), 19.5, 0.05);
  EXPECT_EQ(e.kv_bytes, 80ull * 64000 * 256 * 8 * 2);
  EXPECT_NEAR(gib(e.graph_partial_bytes), 8.2, 0.05);
  // 4 x 512 x 8192 + 4 x 512 x (1 + 8192 + 64000) + 8192^2 x 9/16 + 4 x 64000 x (512 x 64 + 128 x 8)
  EXPECT_EQ(e.graph_partial_bytes, 16777216ull + 147851264 + 37748736 + 8650752000);
  // Full offload on one GPU: the attention term, 4 x 512 x (1 + 4 x 8192 + 64000 x 65).
  EXPECT_EQ(e.graph_full_bytes, 4ull * 512 * (1 + 4 * 8192 + 64000ull * 65));
  EXPECT_EQ(e.formula, "llama");
}

TEST(OllamaEstimate, KvTypesAndParallelAndGemma3Windows) {
  const LlmModel m = llama_70b();
  EXPECT_EQ(ollama_estimate(m, 8192, 512, 1, "q8_0").kv_bytes, 80ull * 8192 * 256 * 8);  // 1 byte a value
  EXPECT_EQ(ollama_estimate(m, 8192, 512, 4, "f16").kv_bytes, 4 * ollama_estimate(m, 8192, 512, 1, "f16").kv_bytes);
  // num_batch is at most num_ctx.
  EXPECT_EQ(ollama_estimate(m, 256, 512, 1, "f16").graph_full_bytes,
            ollama_estimate(m, 256, 256, 1, "f16").graph_full_bytes);
  LlmModel g = m;
  g.architecture = "gemma3";
  g.n_layer = 12;
  g.sliding_window = 1024;
  const OllamaEstimate e = ollama_estimate(g, 8192, 512, 1, "f16");
  EXPECT_EQ(e.kv_per_layer[0], (1024ull + 512) * 256 * 8 * 2);  // windowed: window + batch
  EXPECT_EQ(e.kv_per_layer[5], 8192ull * 256 * 8 * 2);          // every sixth attends to all
}

TEST(OllamaEstimate, OtherArchitecturesFallBackToASixthOfTheCachePerGroup) {
  LlmModel m = llama_70b();
  m.architecture = "starcoder2";
  const OllamaEstimate e = ollama_estimate(m, 4096, 512, 1, "f16");
  EXPECT_EQ(e.graph_full_bytes, 8 * e.kv_bytes / 6);
  EXPECT_EQ(e.graph_partial_bytes, e.graph_full_bytes);
}

TEST(OllamaEstimate, NewerOllamaAllocatesAsLlamaCpp) {
  EXPECT_EQ(engine_rules("ollama@0.12.10").kind, EngineKind::kOllama);
  EXPECT_EQ(engine_rules("ollama@0.12.11").kind, EngineKind::kLlamaCpp);
  EXPECT_EQ(engine_rules("ollama").kind, EngineKind::kLlamaCpp);
  EXPECT_THROW(engine_rules("ollama@0.1.20"), InputError);
}

}  // namespace
}  // namespace gpumem::llm
