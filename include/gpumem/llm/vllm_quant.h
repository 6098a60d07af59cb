#pragma once
// The quantized checkpoints vLLM serves, one row each (vLLM's --quantization
// names): how many bytes a weight of a decoder block's linear layers takes in
// that format. Embeddings, the output layer and vectors keep the
// checkpoint's type, as the quantizers leave them.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpumem/llm/llm_model.h"

namespace gpumem::llm {

struct VllmQuantFormat {
  std::string_view name;  // as --quant and vLLM's --quantization take it
  // Bytes of one [out, in] matrix: in x out x per_weight, plus per_input x in
  // (GPTQ's g_idx) and per_matrix (FP8's scale).
  double per_weight = 0;
  uint64_t per_input = 0;
  uint64_t per_matrix = 0;
  std::string_view dtype;   // how the report names the quantized tensors
  std::string_view layout;  // where the figure comes from
};

const std::vector<VllmQuantFormat>& vllm_quant_formats();
// nullptr when `name` is none of them.
const VllmQuantFormat* vllm_quant_named(std::string_view name);

// `model` with its blocks' linear layers priced in `format`.
LlmModel vllm_quantized(LlmModel model, const VllmQuantFormat& format);

}  // namespace gpumem::llm
