#pragma once
// `gpumem quantize`: a safetensors, GGUF or ONNX file's float tensors to a
// GGUF v3 file of ggml types, chosen per tensor as llama.cpp's
// llama-quantize chooses them (src/llama-quant.cpp: which tensors may be
// quantized, the Q4_K_M mixture, the fallback when a row is not a whole
// number of blocks), each tensor's round-trip error measured. Tensors are
// read, converted and written one at a time.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpumem/weights/gguf.h"

namespace gpumem::weights {

// What --type names: llama-quantize's file types that gpumem has the
// codecs for, and `q4_k` (every quantizable tensor Q4_K).
struct QuantizeRecipe {
  std::string_view name;  // "q4_k_m"
  uint32_t default_type;  // the ggml type most tensors get
  uint32_t file_type;     // llama.cpp's LLAMA_FTYPE_*, written as general.file_type
  bool mixture;           // llama.cpp raises some tensors (output.weight, attn_v, ffn_down) above the default
};
const std::vector<QuantizeRecipe>& quantize_recipes();
// nullptr when unknown; the name is matched case-insensitively.
const QuantizeRecipe* quantize_recipe_named(std::string_view name);

struct QuantizeOptions {
  std::string type = "q8_0";  // a recipe's name
  bool pure = false;          // every quantizable tensor at the default type (llama-quantize --pure)
  std::string keep;           // ECMAScript regex; tensors whose whole name matches keep their type
  // Key-values to write, replacing the input's of the same key: the
  // architecture and hyper-parameters of a safetensors checkpoint, from its
  // config.json (llm/llama_cpp_keys.h). The rules read them as from a GGUF.
  std::vector<GgufKeyValue> metadata;
  std::string metadata_from;  // where `metadata` came from (a config.json), for the report
};

// A tensor as the rules see it.
struct TensorShape {
  std::string name;
  std::string dtype;         // "F32", "F16", "BF16", "I64", "Q4_K"...
  std::vector<uint64_t> ne;  // GGUF order: ne[0] is the innermost (a row)
};

// What llama.cpp's rules read from the model beyond its tensors.
struct ModelHints {
  std::string architecture;  // GGUF's general.architecture; "" for other inputs
  int n_layer = 0;           // {arch}.block_count, else the highest layer index + 1
  int n_expert = 0;          // {arch}.expert_count
  bool onnx = false;         // ONNX names its weights onnx::MatMul_12: no "ends in weight" rule
  // llama.cpp's LLM_TYPE_70B: a Llama of 80 layers with grouped-query
  // attention (llama.attention.head_count above head_count_kv).
  bool llama_70b = false;
};

struct TypeChoice {
  uint32_t type = 0;     // ggml type id to write
  bool convert = false;  // false: the bytes are copied as they are
  std::string why;       // "1-D", "--keep", "use_more_bits layer 3/8", "row of 3: fallback F16"...
};

// Each tensor's type, in the order given; the rules walk the tensors in
// llama.cpp's order (by layer, then name). InputError for a recipe gpumem
// does not know or a tensor it cannot convert.
std::vector<TypeChoice> choose_types(const std::vector<TensorShape>& tensors, const ModelHints& hints,
                                     const QuantizeOptions& options);

// One tensor of the report.
struct QuantizedTensor {
  std::string name;
  std::vector<uint64_t> shape;  // as the input lists it (GGUF: ne[0] first)
  std::string from, to;         // dtype names: "F32" -> "Q4_K"
  std::string why;
  uint64_t elements = 0;
  uint64_t bytes_before = 0, bytes_after = 0;
  double rmse = 0, max_abs = 0;  // of the values written against the input's (0 when copied)
};

struct QuantizeReport {
  std::string input, output, format;  // format: "safetensors", "gguf", "onnx"
  std::string type;                   // the recipe
  bool pure = false;
  uint32_t file_type = 0;
  std::string architecture;              // general.architecture written; "" when the output has none
  std::string architecture_from;         // "input" (a GGUF's own), a config.json's path, or ""
  std::vector<QuantizedTensor> tensors;  // in the input's order, which the output keeps
  uint64_t elements = 0, bytes_before = 0, bytes_after = 0;
  uint64_t input_file_bytes = 0, output_file_bytes = 0;
  size_t converted = 0;  // tensors whose type changed
  double seconds = 0;
};

// Reads `input`, writes `output` (atomically: a temporary file renamed at
// the end, so a failure leaves no output), returns what it did. InputError
// with one line naming the file, the tensor and the problem.
QuantizeReport quantize_file(const std::string& input, const std::string& output, const QuantizeOptions& options);

}  // namespace gpumem::weights
