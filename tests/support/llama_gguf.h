#pragma once
// GGUF files of llama.cpp's "llama" architecture made from a shape alone:
// the key-values llama.cpp reads (hyper-parameters and a tokenizer it
// accepts) and the tensor table it loads, with no data. Written with
// weights::write_gguf_sparse they cost no disk, so llama.cpp itself can be
// asked what a model of any size needs (tools/llama_cpp_buffers.mjs records
// its answers for `gpumem llm` to be checked against).
#include <cstdint>
#include <string>

#include "gpumem/weights/gguf.h"

namespace gpumem::llm {

// A decoder transformer of llama.cpp's "llama" architecture, or of
// "gemma2" (the same blocks with a norm after attention and after the MLP,
// tied embeddings, a sliding window on every other layer).
struct LlamaShape {
  std::string name;                    // e.g. "llama-3-8b"; becomes general.name
  std::string architecture = "llama";  // or "gemma2"
  uint32_t sliding_window = 0;         // gemma2: attention.sliding_window
  uint32_t n_layer = 0, n_embd = 0, n_head = 0, n_head_kv = 0, n_ff = 0, n_vocab = 0, n_ctx_train = 0;
  uint32_t head_dim = 0;         // 0: n_embd / n_head
  bool tied_embeddings = false;  // true: no output.weight (llama.cpp then uses token_embd)
  uint32_t weight_type = 1;      // ggml type id of the 2-D matrices (1 = F16, 8 = Q8_0, 12 = Q4_K, ...); norms are F32
  float rope_freq_base = 10000.0f;
  float rms_norm_eps = 1e-5f;
};

// head_dim, or n_embd / n_head when it is 0.
uint32_t head_dim_of(const LlamaShape& shape);

// The GGUF metadata (general.architecture "llama", the llama.*
// hyper-parameters, an SPM tokenizer of n_vocab tokens: <unk>, <s>, </s>,
// the 256 byte tokens, then placeholders) and the tensor table as llama.cpp
// loads the architecture (token_embd, output_norm, output unless tied, and
// per layer blk.N.attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm,
// ffn_gate, ffn_up, ffn_down), without data: for weights::write_gguf_sparse.
// Throws std::invalid_argument for a zero dimension, n_head not dividing
// n_embd (without head_dim), n_head_kv not dividing n_head, n_vocab under
// 259, an unknown weight type or a row length that is not a multiple of its
// block size.
weights::GgufContents llama_gguf(const LlamaShape& shape);

}  // namespace gpumem::llm
