// The figures are each format's tensors as the quantizers write them; none
// is fitted.
#include "gpumem/llm/vllm_quant.h"

#include <cmath>

namespace gpumem::llm {

const std::vector<VllmQuantFormat>& vllm_quant_formats() {
  static const std::vector<VllmQuantFormat> formats = {
      // AutoAWQ's GEMM layout, 4 bits in groups of 128: qweight int32
      // [in, out/8] (half a byte a weight), qzeros int32 [in/128, out/8]
      // (1/256 byte) and fp16 scales [in/128, out] (1/64 byte).
      {"awq", 0.5 + 1.0 / 256 + 1.0 / 64, 0, 0, "AWQ 4-bit",
       "AutoAWQ WQLinear_GEMM: qweight, qzeros, scales, group 128"},
      // AutoGPTQ's QuantLinear, 4 bits in groups of 128: qweight int32
      // [in/8, out], qzeros int32 [in/128, out/8], fp16 scales [in/128,
      // out], and g_idx int32 [in].
      {"gptq", 0.5 + 1.0 / 256 + 1.0 / 64, 4, 0, "GPTQ 4-bit",
       "AutoGPTQ QuantLinear: qweight, qzeros, scales, g_idx, group 128"},
      // vLLM's Fp8LinearMethod: one byte a weight and one fp32 scale per
      // matrix (per-tensor scaling; the input scale of a static checkpoint
      // is one more float).
      {"fp8", 1.0, 0, 8, "FP8 E4M3", "vLLM Fp8LinearMethod: weight float8_e4m3fn, weight_scale, input_scale"},
      // bitsandbytes' 4-bit (NF4) as vLLM loads it: two weights a byte and
      // an fp32 absmax per block of 64 (bnb_4bit_use_double_quant off, the
      // BitsAndBytesConfig default).
      {"bitsandbytes", 0.5 + 4.0 / 64, 0, 0, "bitsandbytes NF4",
       "bitsandbytes Params4bit: packed NF4, absmax per 64 weights"},
  };
  return formats;
}

const VllmQuantFormat* vllm_quant_named(std::string_view name) {
  for (const auto& f : vllm_quant_formats())
    if (f.name == name) return &f;
  return nullptr;
}

LlmModel vllm_quantized(LlmModel model, const VllmQuantFormat& format) {
  for (auto& t : model.tensors) {
    if (t.layer < 0 || t.shape.size() < 2) continue;  // embeddings, output, norms
    const uint64_t in = t.shape[0];                   // GGUF order: the innermost dimension first
    uint64_t out = 1;
    for (size_t d = 1; d < t.shape.size(); ++d) out *= t.shape[d];
    const uint64_t matrices = t.shape.size() > 2 ? t.shape.back() : 1;  // experts stacked
    t.bytes = static_cast<uint64_t>(std::ceil(static_cast<double>(in) * static_cast<double>(out) * format.per_weight)) +
              format.per_input * in * matrices + format.per_matrix * matrices;
    t.dtype = std::string(format.dtype);
  }
  model.weight_dtype = std::string(format.dtype);
  return model;
}

}  // namespace gpumem::llm
