#pragma once
// A decoder-only language model as `gpumem llm` sees it: the
// hyper-parameters that size its KV cache and activations, and its weight
// tensors with the layer each belongs to. It comes from a GGUF file (its
// llama.cpp key-values and tensor table), from a Hugging Face folder (its
// config.json and safetensors files), or from a bare config.json, whose
// tensors are then derived from the architecture.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpumem::llm {

struct LlmTensor {
  std::string name;
  std::vector<uint64_t> shape;  // innermost dimension first (GGUF's ne order)
  std::string dtype;            // "F16", "BF16", "F32", "Q4_K", ...
  uint64_t bytes = 0;
  int layer = -1;  // the transformer block it belongs to; -1 for embeddings, the final norm and the output
};

struct LlmModel {
  std::string source;        // the path given
  std::string format;        // "gguf", "safetensors", "config"
  std::string architecture;  // "llama", "qwen2", "mistral", ... as the file names it
  uint32_t n_layer = 0;
  uint64_t n_embd = 0;
  uint32_t n_head = 0;
  uint32_t n_head_kv = 0;
  uint64_t head_dim_k = 0;  // per head; n_embd / n_head unless the model says otherwise
  uint64_t head_dim_v = 0;
  uint64_t n_ff = 0;
  uint64_t n_vocab = 0;
  uint64_t n_ctx_train = 0;     // max_position_embeddings / context_length; 0 when unknown
  uint64_t sliding_window = 0;  // 0: every layer attends to the whole context
  // Which layers use the sliding window (size n_layer); empty with a window
  // means every layer does.
  std::vector<bool> swa_layers;
  // What decided the windows (llm/sliding_windows.h), for the report: empty
  // when the file names no window.
  std::string window_rule;
  uint32_t n_expert = 0;  // mixture of experts: experts per layer (0: a dense MLP)
  uint32_t n_expert_used = 0;
  bool tied_embeddings = false;
  double attention_dropout = 0;  // config.json's attention_dropout: a mask per attention map in training
  std::string weight_dtype;  // the dtype most of the weight bytes have ("BF16", "Q4_K", ...)
  std::vector<LlmTensor> tensors;

  uint64_t parameters() const;
  uint64_t weight_bytes() const;
  // Whether layer `i` keeps only the last sliding_window tokens.
  bool layer_is_windowed(uint32_t i) const;
};

// Reads MODEL: a .gguf file, a folder holding config.json (and, when there,
// its *.safetensors files or model.safetensors.index.json), or a
// config.json. Throws InputError naming the file and the missing or bad
// key.
LlmModel load_llm_model(const std::string& path);

// The model a Hugging Face config.json describes, its tensors derived from
// the architecture (a Llama-style decoder: attention q/k/v/o, a gated MLP,
// two RMS norms per block; biases where the family has them) at the
// config's torch_dtype. `text` is the file's contents, `path` names it.
LlmModel model_from_hf_config(const std::string& text, const std::string& path);

// The tensors of a Llama-style decoder as llama.cpp names them in GGUF
// (token_embd, blk.N.attn_q, ..., output_norm, output; ffn_*_exps for
// experts), every matrix as `matrix_dtype` and the norms and biases as
// `vector_dtype`. A matrix whose rows are not whole blocks of a quantized
// type falls back to F16.
struct DecoderExtras {
  bool qkv_bias = false;    // Qwen2, attention_bias
  bool qk_norm = false;     // Qwen3, Gemma 3: an RMS norm over each head's q and k
  bool post_norms = false;  // Gemma 2 and 3: a norm after attention and after the MLP too
};
std::vector<LlmTensor> decoder_tensors(const LlmModel& shape, const std::string& matrix_dtype,
                                       const std::string& vector_dtype, const DecoderExtras& extras = {});

// Bytes of `elements` values of a dtype: safetensors' names ("BF16",
// "F32", "F8_E4M3"...) or a ggml type's ("Q4_K", "Q8_0"); nullopt when the
// name is unknown or the row length is not a whole number of blocks.
std::optional<uint64_t> dtype_bytes(const std::string& dtype, uint64_t row_elements, uint64_t rows);

}  // namespace gpumem::llm
