#pragma once
// What gpumem knows of each decoder family, one row per architecture name
// (model_families.cpp): how transformers builds it, what llama.cpp calls it
// and how it windows it, which of ollama's estimates it gets, and whether
// `gpumem finetune` builds its step. Adding a family is a row there (and,
// for a new kernel, its code in finetune/decoder_step.cpp).
#include <cstdint>
#include <string_view>
#include <vector>

namespace gpumem::llm {

// ollama's GraphSize formulas (fs/ggml/ggml.go up to v0.12.10), by the
// architecture name it matches.
enum class OllamaGraph : std::uint8_t { kFallback, kLlama, kGemma, kQwen2, kCommandR, kPhi2 };

struct ModelFamily {
  // As config.json's model_type or GGUF's general.architecture spell it; a
  // family both spell differently has a row per spelling.
  std::string_view name;
  // The architecture llama.cpp loads it as (convert_hf_to_gguf.py's classes:
  // Mistral and Mixtral are "llama").
  std::string_view gguf;
  // llama.cpp's window pattern (llama-model.cpp, hparams.set_swa_pattern):
  // layer i is windowed when i % period < period - 1; 0: full attention on
  // every layer although the config names a window; -1: not in llama.cpp's
  // list (the config's window is taken for every layer).
  int window_period;
  // transformers' modeling_<family>.py and configuration_<family>.py:
  bool untied;             // tie_word_embeddings defaults to false (PretrainedConfig's default is true)
  bool qkv_bias;           // q, k and v projections with biases
  bool qk_norm;            // RMSNorm on q and k per head
  bool post_norms;         // norms after attention and the MLP too: four per layer
  bool gemma_style;        // (1 + w) RMSNorm, GELU MLP, embeddings scaled by sqrt(hidden)
  bool softcapping;        // attention scores and final logits capped by tanh
  bool fused_projections;  // qkv_proj and gate_up_proj, one matrix each
  bool finetune;           // `gpumem finetune` builds its step (finetune/decoder_step.cpp)
  OllamaGraph ollama;      // the formula ollama's estimate uses for this name
};

// Every row, in the order messages list them.
const std::vector<ModelFamily>& model_families();
// The row named `name`; nullptr for an architecture gpumem has no row for
// (it then gets every default: tied embeddings, no window rule, ollama's
// fallback, no fine-tuning step).
const ModelFamily* model_family(std::string_view name);

}  // namespace gpumem::llm
