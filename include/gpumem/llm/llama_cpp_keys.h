#pragma once
// The GGUF key-values with which llama.cpp (and `gpumem llm`) read a
// model's shape: general.architecture and the ARCH.* hyper-parameters, as
// llama.cpp's convert_hf_to_gguf.py writes them. `gpumem quantize` adds them
// to a GGUF made from safetensors, whose config.json holds the shape.
#include <string>
#include <vector>

#include "gpumem/llm/llm_model.h"
#include "gpumem/weights/gguf.h"

namespace gpumem::llm {

// llama.cpp's general.architecture for a config.json model_type: "mistral"
// and "mixtral" load as "llama", "qwen2_moe" as "qwen2moe", "gemma3_text"
// as "gemma3", ...; a name llama.cpp spells the same is returned unchanged.
std::string llama_cpp_architecture(const std::string& model_type);

// general.architecture, then ARCH.block_count, context_length (when known),
// embedding_length, feed_forward_length, attention.head_count,
// attention.head_count_kv, attention.key_length, attention.value_length,
// vocab_size, attention.sliding_window (when there is one), expert_count and
// expert_used_count (for a mixture of experts).
std::vector<weights::GgufKeyValue> llama_cpp_keys(const LlmModel& m);

}  // namespace gpumem::llm
