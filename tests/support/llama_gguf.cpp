// A llama-architecture GGUF from a shape: the key-values llama.cpp's loader
// requires (llama_model_loader, llama_vocab::load for an SPM vocabulary) and
// the tensor names and shapes its "llama" architecture creates, so that a
// sparse file of any size loads in llama.cpp as the real model would.
#include "support/llama_gguf.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gpumem/llm/llm_model.h"

namespace gpumem::llm {
namespace {

using weights::GgufContents;
using weights::GgufTensor;
using weights::GgufValue;

constexpr uint32_t kF32 = 0;
// SPM token types (llama_token_type): normal, unknown, control, byte.
constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kByte = 6;

// general.file_type (llama_ftype) for a model whose matrices are all of one
// type; llama.cpp only prints it. 0 when there is no such ftype.
uint32_t file_type_of(uint32_t ggml_type) {
  switch (ggml_type) {
    case 0: return 0;    // ALL_F32
    case 1: return 1;    // MOSTLY_F16
    case 2: return 2;    // MOSTLY_Q4_0
    case 3: return 3;    // MOSTLY_Q4_1
    case 6: return 8;    // MOSTLY_Q5_0
    case 7: return 9;    // MOSTLY_Q5_1
    case 8: return 7;    // MOSTLY_Q8_0
    case 10: return 10;  // MOSTLY_Q2_K
    case 12: return 14;  // MOSTLY_Q4_K_S (every matrix Q4_K)
    case 13: return 16;  // MOSTLY_Q5_K_S
    case 14: return 18;  // MOSTLY_Q6_K
    case 30: return 32;  // MOSTLY_BF16
    default: return 0;
  }
}

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("llama shape: " + what);
}

// <unk>, <s>, </s>, <0x00>..<0xFF>, then placeholders up to n_vocab.
void add_tokenizer(GgufContents& c, uint32_t n_vocab) {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  tokens.reserve(n_vocab);
  const auto add = [&](std::string t, int32_t type) {
    scores.push_back(-static_cast<float>(tokens.size()));
    tokens.push_back(std::move(t));
    types.push_back(type);
  };
  add("<unk>", kUnknown);
  add("<s>", kControl);
  add("</s>", kControl);
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    add(hex, kByte);
  }
  while (tokens.size() < n_vocab) {
    std::string t = "t";  // not "t" + ...: GCC 12 warns falsely (-Wrestrict) on that
    t += std::to_string(tokens.size());
    add(std::move(t), kNormal);
  }
  c.metadata.push_back({"tokenizer.ggml.model", GgufValue::string("llama")});
  c.metadata.push_back({"tokenizer.ggml.tokens", GgufValue::strings(tokens)});
  c.metadata.push_back({"tokenizer.ggml.scores", GgufValue::f32s(scores)});
  c.metadata.push_back({"tokenizer.ggml.token_type", GgufValue::i32s(types)});
  c.metadata.push_back({"tokenizer.ggml.unknown_token_id", GgufValue::u32(0)});
  c.metadata.push_back({"tokenizer.ggml.bos_token_id", GgufValue::u32(1)});
  c.metadata.push_back({"tokenizer.ggml.eos_token_id", GgufValue::u32(2)});
}

}  // namespace

uint32_t head_dim_of(const LlamaShape& shape) {
  if (shape.head_dim != 0) return shape.head_dim;
  return shape.n_head == 0 ? 0 : shape.n_embd / shape.n_head;
}

GgufContents llama_gguf(const LlamaShape& s) {
  require(s.n_layer > 0 && s.n_embd > 0 && s.n_head > 0 && s.n_head_kv > 0 && s.n_ff > 0 && s.n_ctx_train > 0,
          "every dimension must be positive");
  require(s.head_dim != 0 || s.n_embd % s.n_head == 0, "n_head must divide n_embd (or give head_dim)");
  require(s.n_head % s.n_head_kv == 0, "n_head_kv must divide n_head");
  require(s.n_vocab >= 259, "n_vocab must hold the 3 special and 256 byte tokens");
  const weights::GgmlType* type = weights::ggml_type(s.weight_type);
  require(type != nullptr, "unknown ggml weight type " + std::to_string(s.weight_type));

  const uint64_t hd = head_dim_of(s);
  for (uint64_t row : {uint64_t{s.n_embd}, uint64_t{s.n_ff}, hd * s.n_head})
    require(row % type->block_size == 0, "a row of " + std::to_string(row) + " is not a multiple of " +
                                             std::string(type->name) + "'s block of " +
                                             std::to_string(type->block_size));

  const bool gemma2 = s.architecture == "gemma2";
  require(gemma2 || s.architecture == "llama", "architecture must be llama or gemma2");
  require(!gemma2 || s.sliding_window > 0, "gemma2 needs a sliding window");
  const std::string a = s.architecture + ".";
  GgufContents c;
  c.metadata = {
      {"general.architecture", GgufValue::string(s.architecture)},
      {"general.name", GgufValue::string(s.name)},
      {"general.file_type", GgufValue::u32(file_type_of(s.weight_type))},
      {a + "vocab_size", GgufValue::u32(s.n_vocab)},
      {a + "context_length", GgufValue::u32(s.n_ctx_train)},
      {a + "embedding_length", GgufValue::u32(s.n_embd)},
      {a + "block_count", GgufValue::u32(s.n_layer)},
      {a + "feed_forward_length", GgufValue::u32(s.n_ff)},
      {a + "attention.head_count", GgufValue::u32(s.n_head)},
      {a + "attention.head_count_kv", GgufValue::u32(s.n_head_kv)},
      {a + "attention.key_length", GgufValue::u32(static_cast<uint32_t>(hd))},
      {a + "attention.value_length", GgufValue::u32(static_cast<uint32_t>(hd))},
      {a + "rope.dimension_count", GgufValue::u32(static_cast<uint32_t>(hd))},
      {a + "rope.freq_base", GgufValue::f32(s.rope_freq_base)},
      {a + "attention.layer_norm_rms_epsilon", GgufValue::f32(s.rms_norm_eps)},
  };
  if (gemma2) {
    // Gemma 2's published soft-capping values (its config.json).
    c.metadata.push_back({a + "attention.sliding_window", GgufValue::u32(s.sliding_window)});
    c.metadata.push_back({a + "attn_logit_softcapping", GgufValue::f32(50.0f)});
    c.metadata.push_back({a + "final_logit_softcapping", GgufValue::f32(30.0f)});
  }
  add_tokenizer(c, s.n_vocab);

  // The tensors are decoder_tensors' Llama layout; llama.cpp's convert
  // script writes the embeddings, final norm and output before the blocks.
  LlmModel shape;
  shape.n_layer = s.n_layer;
  shape.n_embd = s.n_embd;
  shape.n_head = s.n_head;
  shape.n_head_kv = s.n_head_kv;
  shape.head_dim_k = shape.head_dim_v = hd;
  shape.n_ff = s.n_ff;
  shape.n_vocab = s.n_vocab;
  shape.tied_embeddings = s.tied_embeddings || gemma2;
  DecoderExtras extras;
  extras.post_norms = gemma2;
  std::vector<LlmTensor> tensors = decoder_tensors(shape, std::string(type->name), "F32", extras);
  std::stable_partition(tensors.begin(), tensors.end(), [](const LlmTensor& t) { return t.layer < 0; });
  for (auto& t : tensors) {
    const uint32_t id = t.dtype == "F32" ? kF32 : s.weight_type;
    c.tensors.push_back(GgufTensor{std::move(t.name), id, std::move(t.shape), ""});
  }
  return c;
}

}  // namespace gpumem::llm
