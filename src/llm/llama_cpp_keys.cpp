// A model's shape as llama.cpp's GGUF key-values (llama-arch.cpp's LLM_KV_*
// names), the inverse of gguf_model.cpp's reader.
#include "gpumem/llm/llama_cpp_keys.h"

#include "gpumem/llm/model_families.h"

namespace gpumem::llm {

std::string llama_cpp_architecture(const std::string& model_type) {
  // The families' table says what llama.cpp loads each as (Mistral as llama).
  const ModelFamily* family = model_family(model_type);
  return family != nullptr ? std::string(family->gguf) : model_type;
}

std::vector<weights::GgufKeyValue> llama_cpp_keys(const LlmModel& m) {
  using weights::GgufValue;
  const std::string arch = llama_cpp_architecture(m.architecture);
  std::vector<weights::GgufKeyValue> keys{{"general.architecture", GgufValue::string(arch)}};
  const auto add = [&](const std::string& key, uint64_t value) {
    keys.push_back(
        {arch + "." + key, value > UINT32_MAX ? GgufValue::u64(value) : GgufValue::u32(static_cast<uint32_t>(value))});
  };
  add("block_count", m.n_layer);
  if (m.n_ctx_train != 0) add("context_length", m.n_ctx_train);
  add("embedding_length", m.n_embd);
  add("feed_forward_length", m.n_ff);
  add("attention.head_count", m.n_head);
  add("attention.head_count_kv", m.n_head_kv);
  add("attention.key_length", m.head_dim_k);
  add("attention.value_length", m.head_dim_v);
  add("vocab_size", m.n_vocab);
  if (m.sliding_window != 0) add("attention.sliding_window", m.sliding_window);
  if (m.n_expert != 0) {
    add("expert_count", m.n_expert);
    add("expert_used_count", m.n_expert_used);
  }
  return keys;
}

}  // namespace gpumem::llm
