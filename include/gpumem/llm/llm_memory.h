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
// tensor's memory once its last reader ran. forward_peak sums what is alive
// at each stage of a decoder layer and at the output, with coefficients
// fitted to llama.cpp's own compute buffers (tests/data/llm/README.md:
// 128 runs, every one within 4.4%); docs/llm.md lists the terms.
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
  bool quantized() const { return block_values > 1; }
};
// InputError for an unknown name.
KvType kv_type(const std::string& name);

// K's and V's types (llama.cpp's -ctk and -ctv): "q8_0" for both, or
// "q8_0,f16" for K then V.
struct KvTypes {
  KvType k, v;
};
KvTypes kv_types(const std::string& spec);

// llama.cpp allocates its cache in cells of this many tokens (it pads
// n_ctx up to a multiple of 256).
inline constexpr uint64_t kKvCellPadding = 256;
// Cells a whole-context layer holds for `sequences` of `tokens` tokens.
inline uint64_t kv_cells(uint64_t tokens, uint64_t sequences, uint64_t padding = kKvCellPadding) {
  return (tokens * sequences + padding - 1) / padding * padding;
}

struct KvCache {
  uint64_t bytes_per_token = 0;  // every layer's K and V for one token (before any window)
  uint64_t cells = 0;            // tokens the whole-context layers hold: sequences x tokens, padded
  uint64_t window_cells = 0;     // tokens a windowed layer holds: window x sequences + ubatch, padded, <= cells
  uint64_t bytes = 0;            // windows applied
  uint64_t k_bytes = 0, v_bytes = 0;
  uint32_t windowed_layers = 0;
};
// The cache for `sequences` sequences of `tokens` cached tokens over layers
// [first_layer, end_layer): a whole-context layer holds sequences x tokens
// rounded up to kKvCellPadding cells; a windowed one, as llama.cpp's
// separate cache for them, window x sequences + ubatch cells, rounded up the
// same way, and never more than a whole-context layer. Throws InputError
// when a row is not a whole number of the type's blocks.
//
// Older llama.cpp releases pad differently and keep one cache for every
// layer (`layout`, from llm/engines.h).
struct KvLayout {
  uint64_t cell_padding = kKvCellPadding;
  bool window_cache = true;  // windowed layers in a cache of their own (llama.cpp's iSWA)
};
KvCache kv_cache(const LlmModel& m, const KvTypes& types, uint64_t tokens, uint64_t sequences = 1,
                 uint32_t first_layer = 0, uint32_t end_layer = ~0u, uint64_t ubatch = 512,
                 const KvLayout& layout = {});

// One term of a forward's live set.
struct ForwardTerm {
  std::string name;     // "attention scores (KQ)", "logits", ...
  std::string formula;  // how it was computed, e.g. "8192 cached x 512 tokens x 32 heads x 4 B"
  uint64_t bytes = 0;
};

struct ForwardPeak {
  uint64_t bytes = 0;
  std::string stage;  // where the peak is: "attention", "feed-forward" or "output"
  std::vector<ForwardTerm> terms;
};

// What differs between llama.cpp releases in the compute buffer
// (llm/engines.h; measured per release, tests/data/llm/llama_cpp_versions.json):
// how many embedding- or feed-forward-wide f32 tensors (in halves) the
// allocator keeps alive at each stage, against the newest release's, and
// whether a quantized cache is rotated.
struct GraphRules {
  uint32_t output_halves = 4;           // embedding-wide tensors x 1/2 beside the logits
  int attention_halves_delta = 0;       // embedding-wide, beside the scores (without flash attention)
  int attention_kv_halves_delta = 0;    // K- and V-wide, beside the scores
  int ffn_ff_halves_delta = 0;          // feed-forward-wide, in the feed-forward
  int ffn_embd_halves_delta = 0;        // embedding-wide, in the feed-forward
  bool rotated_quantized_cache = true;  // a quantized K or V is read through a Hadamard rotation
};

struct ForwardShape {
  uint64_t tokens = 512;   // tokens in one forward: min(context, n_ubatch)
  uint64_t kv_tokens = 0;  // cache cells attended to (the whole cache, as llama.cpp reserves)
  bool flash_attention = true;
  bool k_quantized = false;  // a quantized K (or V) cache is rotated by a Hadamard matrix
  bool v_quantized = false;
  uint32_t tensor_parallel = 1;  // heads, KV heads, the feed-forward and the vocabulary split this many ways
  bool with_output = true;       // false for a pipeline stage without the output layer
  GraphRules graph;              // the release's (the newest by default)
};

// The peak of one forward's activations and workspace (f32, as llama.cpp
// computes), the largest of its attention, feed-forward and output stages.
ForwardPeak forward_peak(const LlmModel& m, const ForwardShape& shape);

}  // namespace gpumem::llm
