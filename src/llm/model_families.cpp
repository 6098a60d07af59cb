// The table of decoder families (include/gpumem/llm/model_families.h).
//
// Sources: transformers' configuration_<family>.py (tie_word_embeddings
// defaults) and modeling_<family>.py (biases, norms, fused projections,
// softcapping); llama.cpp's convert_hf_to_gguf.py (the architecture each
// loads as) and llama-model.cpp load_hparams() (set_swa_pattern periods, and
// the families it runs with full attention although their configs name a
// window: Mistral v0.1, Qwen2's use_sliding_window, "Phi SWA is currently
// disabled"); ollama's fs/ggml/ggml.go GraphSize at v0.12.10.
#include "gpumem/llm/model_families.h"

namespace gpumem::llm {

const std::vector<ModelFamily>& model_families() {
  using enum OllamaGraph;
  // name, gguf, window period, untied, qkv bias, qk norm, post norms, gemma style, softcapping, fused, finetune, ollama
  static const std::vector<ModelFamily> table = {
      {"llama", "llama", 0, true, false, false, false, false, false, false, true, kLlama},
      {"llama4", "llama4", -1, false, false, false, false, false, false, false, false, kLlama},
      {"mistral", "llama", 0, true, false, false, false, false, false, false, true, kFallback},
      {"mixtral", "llama", 0, true, false, false, false, false, false, false, true, kFallback},
      {"qwen2", "qwen2", 0, true, true, false, false, false, false, false, true, kQwen2},
      {"qwen2_moe", "qwen2moe", 0, false, true, false, false, false, false, false, false, kFallback},
      {"qwen3", "qwen3", 0, true, false, true, false, false, false, false, true, kFallback},
      {"qwen3_moe", "qwen3moe", -1, true, false, true, false, false, false, false, false, kFallback},
      {"gemma", "gemma", -1, false, false, false, false, true, false, false, true, kGemma},
      {"gemma2", "gemma2", 2, false, false, false, true, true, true, false, true, kGemma},
      {"gemma3", "gemma3", 6, false, false, true, true, true, false, false, true, kGemma},
      {"gemma3_text", "gemma3", 6, false, false, true, true, true, false, false, true, kFallback},
      {"phi3", "phi3", 0, false, false, false, false, false, false, true, true, kFallback},
      {"phi2", "phi2", -1, false, false, false, false, false, false, false, false, kPhi2},
      {"command-r", "command-r", -1, false, false, false, false, false, false, false, false, kCommandR},
      {"cohere2", "cohere2", 4, false, false, false, false, false, false, false, false, kFallback},
      {"starcoder2", "starcoder2", 0, false, false, false, false, false, false, false, false, kFallback},
      {"gpt_oss", "gpt-oss", 2, false, false, false, false, false, false, false, false, kFallback},
      {"gpt-oss", "gpt-oss", 2, false, false, false, false, false, false, false, false, kFallback},
  };
  return table;
}

const ModelFamily* model_family(std::string_view name) {
  for (const ModelFamily& f : model_families())
    if (f.name == name) return &f;
  return nullptr;
}

}  // namespace gpumem::llm
