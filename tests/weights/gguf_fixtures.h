#pragma once
// GGUF contents the weights tests share: a small model with every kind of
// key-value and a few quant types, and Llama-3-8B's tensor table.
#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "gpumem/weights/gguf.h"

namespace gpumem::weights::test_gguf {

inline constexpr uint32_t kF32 = 0, kF16 = 1, kQ8_0 = 8, kQ4_K = 12, kQ6_K = 14;

inline std::string temp_path(const std::string& name) { return testing::TempDir() + "gpumem_gguf_" + name; }

inline std::string write_temp(const std::string& name, const std::string& bytes) {
  const std::string path = temp_path(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

inline std::string pattern(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 31 + seed) & 0xff);
  return s;
}

inline GgufTensor tensor(std::string name, uint32_t type, std::vector<uint64_t> ne, int seed) {
  GgufTensor t{std::move(name), type, std::move(ne), ""};
  t.data = pattern(ggml_tensor_bytes(t.type, t.ne), seed);
  return t;
}

inline GgufContents small_model() {
  GgufContents c;
  c.metadata = {
      {"general.architecture", GgufValue::string("llama")},
      {"general.name", GgufValue::string("tiny")},
      {"llama.block_count", GgufValue::u32(2)},
      {"llama.rope.dimension_count", GgufValue::i32(-3)},
      {"llama.rope.freq_base", GgufValue::f32(500000.0f)},
      {"llama.use_parallel_residual", GgufValue::boolean(true)},
      {"llama.context_length", GgufValue::u64(uint64_t{1} << 40)},
      {"tokenizer.ggml.tokens", GgufValue::strings({"<s>", "a", "b"})},
      {"tokenizer.ggml.token_type", GgufValue::i32s({1, 2, 3, 4, 5, 6, 7, 8, 9})},
      {"tokenizer.ggml.scores", GgufValue::f32s({0.5f, -1.25f})},
  };
  c.tensors = {
      tensor("token_embd.weight", kF32, {4, 3}, 1),
      tensor("blk.0.attn_q.weight", kQ8_0, {64, 2}, 2),
      tensor("blk.0.ffn_up.weight", kQ4_K, {256, 1, 1, 2}, 3),
      tensor("output_norm.weight", kF16, {3}, 4),
  };
  return c;
}

// Llama-3-8B as llama.cpp converts it: F16 embeddings, Q4_K/Q6_K matrices,
// F32 norms; the data left as holes.
inline GgufContents llama3_8b() {
  constexpr uint64_t kHidden = 4096, kLayers = 32, kHeads = 32, kKvHeads = 8, kFfn = 14336, kVocab = 128256;
  constexpr uint64_t kKv = kHidden / kHeads * kKvHeads;
  GgufContents c;
  std::vector<std::string> tokens(kVocab);
  for (uint64_t i = 0; i < kVocab; ++i) tokens[i] = "t" + std::to_string(i);
  c.metadata = {
      {"general.architecture", GgufValue::string("llama")},
      {"llama.block_count", GgufValue::u32(kLayers)},
      {"llama.context_length", GgufValue::u32(8192)},
      {"llama.embedding_length", GgufValue::u32(kHidden)},
      {"llama.feed_forward_length", GgufValue::u32(kFfn)},
      {"llama.attention.head_count", GgufValue::u32(kHeads)},
      {"llama.attention.head_count_kv", GgufValue::u32(kKvHeads)},
      {"llama.rope.freq_base", GgufValue::f32(500000.0f)},
      {"llama.attention.layer_norm_rms_epsilon", GgufValue::f32(1e-5f)},
      {"tokenizer.ggml.tokens", GgufValue::strings(tokens)},
  };
  c.tensors.push_back({"token_embd.weight", kF16, {kHidden, kVocab}, ""});
  for (uint64_t i = 0; i < kLayers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    c.tensors.push_back({b + "attn_norm.weight", kF32, {kHidden}, ""});
    c.tensors.push_back({b + "attn_q.weight", kQ4_K, {kHidden, kHidden}, ""});
    c.tensors.push_back({b + "attn_k.weight", kQ4_K, {kHidden, kKv}, ""});
    c.tensors.push_back({b + "attn_v.weight", kQ6_K, {kHidden, kKv}, ""});
    c.tensors.push_back({b + "attn_output.weight", kQ4_K, {kHidden, kHidden}, ""});
    c.tensors.push_back({b + "ffn_norm.weight", kF32, {kHidden}, ""});
    c.tensors.push_back({b + "ffn_gate.weight", kQ4_K, {kHidden, kFfn}, ""});
    c.tensors.push_back({b + "ffn_up.weight", kQ4_K, {kHidden, kFfn}, ""});
    c.tensors.push_back({b + "ffn_down.weight", kQ6_K, {kFfn, kHidden}, ""});
  }
  c.tensors.push_back({"output_norm.weight", kF32, {kHidden}, ""});
  c.tensors.push_back({"output.weight", kQ6_K, {kHidden, kVocab}, ""});
  return c;
}

}  // namespace gpumem::weights::test_gguf
