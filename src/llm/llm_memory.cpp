// KV cache sizes and the live set of one decoder forward.
#include "gpumem/llm/llm_memory.h"
#include "gpumem/common/flag_names.h"

#include <algorithm>

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/common/units.h"
#include "gpumem/model/dtype.h"

namespace gpumem::llm {

KvType kv_type(const std::string& name) {
  // Block layouts as ggml-common.h defines them; fp8 as vLLM stores it
  // (one byte, e4m3 or e5m2, scales kept per tensor). Float types take every
  // spelling `--dtype` takes (fp16, float16, f16) and keep ggml's name.
  switch (parse_dtype(name).value_or(DType::Undefined)) {
    case DType::Float16: return {"f16", 1, 2};
    case DType::BFloat16: return {"bf16", 1, 2};
    case DType::Float: return {"f32", 1, 4};
    case DType::Float8E4M3FN: return {"fp8", 1, 1};
    default: break;
  }
  if (name == "q8_0") return {name, 32, 34};
  if (name == "q4_0") return {name, 32, 18};
  throw InputError(
      fmt::format(GPUMEM_FLAG_KV_DTYPE ": '{}' is not one of f16, bf16, f32, q8_0, q4_0, fp8", printable(name)));
}

KvTypes kv_types(const std::string& spec) {
  const size_t comma = spec.find(',');
  if (comma == std::string::npos) return {kv_type(spec), kv_type(spec)};
  return {kv_type(spec.substr(0, comma)), kv_type(spec.substr(comma + 1))};
}

namespace {

uint64_t row_bytes(const KvType& t, uint64_t values, const char* what) {
  if (values % t.block_values != 0) {
    throw InputError(fmt::format(GPUMEM_FLAG_KV_DTYPE
                                 " {}: a {} row of {} values is not a whole number of {}-value blocks",
                                 t.name, what, values, t.block_values));
  }
  return values / t.block_values * t.block_bytes;
}

}  // namespace

KvCache kv_cache(const LlmModel& m, const KvTypes& types, uint64_t tokens, uint64_t sequences, uint32_t first_layer,
                 uint32_t end_layer, uint64_t ubatch, const KvLayout& layout) {
  KvCache kv;
  const uint64_t k_row = row_bytes(types.k, uint64_t{m.n_head_kv} * m.head_dim_k, "K");
  const uint64_t v_row = row_bytes(types.v, uint64_t{m.n_head_kv} * m.head_dim_v, "V");
  kv.cells = kv_cells(tokens, sequences, layout.cell_padding);
  // llama.cpp's windowed layers have a cache of their own (llama-kv-cache-iswa.cpp):
  // the window for every sequence plus one ubatch, padded, at most the whole cache.
  // Before it, they kept every cell.
  kv.window_cells = layout.window_cache
                        ? std::min(kv.cells, kv_cells(m.sliding_window * sequences + ubatch, 1, layout.cell_padding))
                        : kv.cells;
  for (uint32_t i = first_layer; i < std::min(end_layer, m.n_layer); ++i) {
    const bool windowed = m.layer_is_windowed(i);
    const uint64_t kept = windowed ? kv.window_cells : kv.cells;
    kv.bytes_per_token += k_row + v_row;
    kv.k_bytes += k_row * kept;
    kv.v_bytes += v_row * kept;
    kv.windowed_layers += windowed ? 1 : 0;
  }
  kv.bytes = kv.k_bytes + kv.v_bytes;
  return kv;
}

namespace {

struct Stage {
  std::string name;
  std::vector<ForwardTerm> terms;
  uint64_t bytes() const {
    uint64_t b = 0;
    for (const auto& t : terms) b += t.bytes;
    return b;
  }
};

// `halves` / 2 tensors of `width` f32 values per token: how many of them
// are alive at once is what the allocator's placement gives, fitted to
// llama.cpp's compute buffers (tests/data/llm/README.md).
ForwardTerm wide(const std::string& name, int64_t signed_halves, uint64_t width, const std::string& what,
                 uint64_t tokens) {
  const uint64_t halves = static_cast<uint64_t>(std::max<int64_t>(0, signed_halves));
  const std::string count = halves % 2 ? fmt::format("{}.5", halves / 2) : fmt::format("{}", halves / 2);
  return {name, fmt::format("{} x {} x {} tokens x 4 B", count, what, tokens), halves * width * tokens * 2};
}

}  // namespace

ForwardPeak forward_peak(const LlmModel& m, const ForwardShape& s) {
  const uint64_t tp = std::max<uint32_t>(1, s.tensor_parallel);
  const uint64_t T = std::max<uint64_t>(1, s.tokens), C = std::max<uint64_t>(1, s.kv_tokens);
  const uint64_t H = div_up(m.n_head, tp);
  const uint64_t E = m.n_embd;
  const uint64_t E_kv = div_up(m.n_head_kv, tp) * (m.head_dim_k + m.head_dim_v) / 2;
  const uint64_t F = div_up(std::max<uint64_t>(m.n_ff, 1) * std::max<uint32_t>(1, m.n_expert_used), tp);
  const uint64_t V = div_up(m.n_vocab, tp);
  const std::string embd = fmt::format("{} embd", E);

  // A quantized cache is read through a Hadamard rotation: one
  // head_dim x head_dim f32 matrix per rotated cache, an input of the graph.
  std::vector<ForwardTerm> rotations;
  for (const auto& [quantized, which] : {std::pair{s.k_quantized, "K"}, std::pair{s.v_quantized, "V"}}) {
    if (quantized && s.graph.rotated_quantized_cache) {
      rotations.push_back({fmt::format("{} rotation", which), fmt::format("{0} x {0} x 4 B", m.head_dim_k),
                           m.head_dim_k * m.head_dim_k * 4});
    }
  }
  auto stage = [&](std::string name, std::vector<ForwardTerm> terms) {
    terms.insert(terms.end(), rotations.begin(), rotations.end());
    return Stage{std::move(name), std::move(terms)};
  };
  const uint64_t mask_bytes = s.flash_attention ? 2 : 4;  // f16 for flash attention, f32 otherwise
  const ForwardTerm mask{"attention mask", fmt::format("{} cached x {} tokens x {} B", C, T, mask_bytes),
                         C * T * mask_bytes};

  std::vector<Stage> stages;
  if (!s.flash_attention) {
    // Without flash attention the scores of every head against every cached
    // token are one f32 tensor (softmax runs in place on it), beside the
    // residual stream, the normalized input, Q, roped Q and the output (one
    // fewer with a quantized K), and K and V.
    stages.push_back(
        stage("attention",
              {{"attention scores (KQ)", fmt::format("{} cached x {} tokens x {} heads x 4 B", C, T, H), C * T * H * 4},
               {"attention mask", fmt::format("{} cached x {} tokens x 4 B", C, T), C * T * 4},
               wide("residual, normed input, Q, roped Q, output",
                    (s.k_quantized ? 8 : 10) + s.graph.attention_halves_delta, E, embd, T),
               wide("K and V", 4 + s.graph.attention_kv_halves_delta, E_kv, fmt::format("{} KV width", E_kv), T)}));
  }
  // The feed-forward: gate, up and their product, the mask still held, and
  // the embedding-wide tensors around them.
  const int ffn_halves = (!s.flash_attention ? 10 : s.v_quantized ? 7 : 8) + s.graph.ffn_embd_halves_delta;
  stages.push_back(stage("feed-forward", {wide("FFN gate, up and gate x up", 6 + s.graph.ffn_ff_halves_delta, F,
                                               fmt::format("{} ff", F), T),
                                          wide("residual and embedding-wide tensors", ffn_halves, E, embd, T), mask}));
  if (s.with_output) {
    // The logits of every token (llama.cpp reserves for all n_ubatch outputs)
    // and the tensors around the final norm: two embedding-wide ones (one
    // in releases before b8095). Where flash attention reads a quantized
    // cache, llama.cpp's buffer holds 0 to 1 more depending on the context
    // (tests/data/llm/llama_cpp_buffers.json): half of one is taken.
    const uint64_t halves = s.graph.output_halves + (s.flash_attention && (s.k_quantized || s.v_quantized) ? 1 : 0);
    stages.push_back(stage("output", {{"logits", fmt::format("{} vocab x {} tokens x 4 B", V, T), V * T * 4},
                                      wide("residual and final norm", halves, E, embd, T)}));
  }
  const auto top = std::max_element(stages.begin(), stages.end(),
                                    [](const Stage& a, const Stage& b) { return a.bytes() < b.bytes(); });
  return {top->bytes(), top->name, top->terms};
}

}  // namespace gpumem::llm
