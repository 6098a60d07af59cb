// llama-architecture GGUFs from a shape: Llama-3-8B's table adds up to its
// published parameter count once written sparse and read back; tied
// embeddings drop output.weight; the tokenizer has n_vocab tokens; shapes
// llama.cpp could not load are refused.
#include <sys/stat.h>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <numeric>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "gpumem/weights/gguf.h"
#include "support/llama_gguf.h"

namespace gpumem::llm {
namespace {

LlamaShape llama3_8b() {
  LlamaShape s;
  s.name = "llama-3-8b";
  s.n_layer = 32;
  s.n_embd = 4096;
  s.n_head = 32;
  s.n_head_kv = 8;
  s.n_ff = 14336;
  s.n_vocab = 128256;
  s.n_ctx_train = 8192;
  s.rope_freq_base = 500000.0f;
  return s;
}

uint64_t params_of(const weights::WeightFile& f) {
  uint64_t n = 0;
  for (const weights::TensorEntry& t : f.tensors)
    n += std::accumulate(t.shape.begin(), t.shape.end(), uint64_t{1}, std::multiplies<>());
  return n;
}

TEST(LlamaGguf, Llama3_8BAddsUpToItsPublishedParameters) {
  const std::string path = testing::TempDir() + "gpumem_llm_llama3_8b.gguf";
  weights::write_gguf_sparse(path, llama_gguf(llama3_8b()));
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_LT(static_cast<uint64_t>(st.st_blocks) * 512, uint64_t{16} << 20);  // 16 GB of holes

  const weights::WeightFile f = weights::read_gguf(path);
  std::remove(path.c_str());
  EXPECT_EQ(params_of(f), 8'030'261'248ull);
  ASSERT_EQ(f.tensors.size(), 3u + 32u * 9u);
  uint64_t bytes = 0;
  for (const weights::TensorEntry& t : f.tensors) bytes += t.bytes;
  EXPECT_EQ(bytes, 2 * 8'030'261'248ull + 2 * (32 * 2 + 1) * 4096);  // F16 but the F32 norms: 2 more bytes each
  EXPECT_EQ(f.metadata.at("general.architecture"), "llama");
  EXPECT_EQ(f.metadata.at("llama.attention.head_count_kv"), "8");
  EXPECT_EQ(f.metadata.at("llama.rope.dimension_count"), "128");
  EXPECT_EQ(f.metadata.at("llama.rope.freq_base"), "500000");
  EXPECT_EQ(f.metadata.at("tokenizer.ggml.tokens"), "[128256 strings]");
  EXPECT_EQ(f.metadata.at("tokenizer.ggml.scores").rfind("[128256 ", 0), 0u);
  EXPECT_EQ(f.metadata.at("tokenizer.ggml.model"), "llama");
}

TEST(LlamaGguf, TiedEmbeddingsHaveNoOutputMatrix) {
  LlamaShape s;
  s.name = "qwen2-0.5b-llama";
  s.n_layer = 24;
  s.n_embd = 896;
  s.n_head = 14;
  s.n_head_kv = 2;
  s.n_ff = 4864;
  s.n_vocab = 151936;
  s.n_ctx_train = 32768;
  s.tied_embeddings = true;
  const std::string path = testing::TempDir() + "gpumem_llm_qwen2.gguf";
  weights::write_gguf_sparse(path, llama_gguf(s));
  const weights::WeightFile f = weights::read_gguf(path);
  std::remove(path.c_str());
  EXPECT_EQ(f.tensors.size(), 2u + 24u * 9u);
  for (const weights::TensorEntry& t : f.tensors) EXPECT_NE(t.name, "output.weight");
  // Qwen2-0.5B less its q/k/v biases (llama has none): 494,032,768 - 24 x (896 + 2 x 128).
  EXPECT_EQ(params_of(f), 494'032'768ull - 24ull * (896 + 2 * 128));
}

TEST(LlamaGguf, QuantizedMatricesAndRefusedShapes) {
  LlamaShape s = llama3_8b();
  s.weight_type = 12;  // Q4_K
  const weights::GgufContents c = llama_gguf(s);
  EXPECT_EQ(c.tensors.front().type, 12u);
  EXPECT_EQ(c.tensors[1].name, "output_norm.weight");
  EXPECT_EQ(c.tensors[1].type, 0u);

  LlamaShape bad = s;
  bad.n_embd = 4000;  // not a multiple of Q4_K's 256
  EXPECT_THROW(llama_gguf(bad), std::invalid_argument);
  bad = s;
  bad.n_head_kv = 7;
  EXPECT_THROW(llama_gguf(bad), std::invalid_argument);
  bad = s;
  bad.weight_type = 4;  // retired
  EXPECT_THROW(llama_gguf(bad), std::invalid_argument);
  bad = s;
  bad.n_vocab = 100;
  EXPECT_THROW(llama_gguf(bad), std::invalid_argument);
}

}  // namespace
}  // namespace gpumem::llm
