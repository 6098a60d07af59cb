#pragma once
// The two memory figures of a decoder that grow with the work, not the
// weights: the KV cache, and the activations and workspace of one forward.
//
// KV cache: each layer keeps, per token, K and V rows of n_head_kv x
// head_dim values (grouped-query attention shares them among heads), so a
// token costs sum over layers of (n_head_kv x head_dim_k + n_head_kv x
// head_dim_v) x element size. A layer with a sliding window keeps at most
// the window's tokens. Quantized caches store rows as ggml blocks (q8_0:
// 34 bytes per 32 values), as llama.cpp's K and V tensors do.
//
// Forward: llama.cpp reserves one compute buffer for the worst micro-batch
// (n_ubatch tokens against the full cache) and its allocator reuses a
// tensor's memory once its last reader ran. forward_peak walks a decoder
// layer's graph the same way and returns the largest set of tensors alive
// at once (see docs/llm.md for the stages and their terms).
#include <cstdint>
#include <string>
#include <vector>

#include "gpumem/llm/llm_model.h"

namespace gpumem::llm {

// A KV cache element type: "f16", "bf16", "f32", "q8_0", "q4_0", "fp8".
struct KvType {
  std::string name;
  uint32_t block_values = 1;  // values per block
  uint32_t block_bytes = 2;   // bytes per block
};
// InputError for an unknown name.
KvType kv_type(const std::string& name);

struct KvCache {
  uint64_t bytes_per_token = 0;  // every layer's K and V for one token (before any window)
  uint64_t bytes = 0;            // for `tokens` tokens, windows applied
  uint64_t k_bytes = 0, v_bytes = 0;
  uint32_t windowed_layers = 0;
};
// The cache for `tokens` cached tokens over `layers` of the model's layers
// (all of them by default); a windowed layer keeps min(tokens, window).
// Throws InputError when a row is not a whole number of the type's blocks.
KvCache kv_cache(const LlmModel& m, const KvType& type, uint64_t tokens);
KvCache kv_cache_of_layers(const LlmModel& m, const KvType& type, uint64_t tokens, uint32_t first_layer,
                           uint32_t end_layer);

// One term of a forward's live set.
struct ForwardTerm {
  std::string name;     // "attention scores", "mask", "residual", ...
  std::string formula;  // how it was computed, e.g. "8192 x 512 x 32 heads x 4 B"
  uint64_t bytes = 0;
};

struct ForwardPeak {
  uint64_t bytes = 0;
  std::string stage;  // the stage where the peak is: "attention", "feed-forward", "output"
  std::vector<ForwardTerm> terms;
};

struct ForwardShape {
  uint64_t tokens = 512;   // tokens in one forward (llama.cpp's n_ubatch)
  uint64_t kv_tokens = 0;  // cached tokens attended to (the whole cache, as llama.cpp reserves)
  uint64_t outputs = 0;    // tokens whose logits are computed (llama.cpp reserves all `tokens`)
  bool flash_attention = true;
  uint32_t tensor_parallel = 1;  // heads, the feed-forward and the vocabulary split this many ways
  bool with_output = true;       // false for a pipeline stage without the output layer
};

// The peak of one forward's activations and workspace (f32, as llama.cpp
// computes), over the attention, feed-forward and output stages.
ForwardPeak forward_peak(const LlmModel& m, const ForwardShape& shape);

}  // namespace gpumem::llm
