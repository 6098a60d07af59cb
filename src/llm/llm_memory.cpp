// KV cache sizes and the live set of one decoder forward.
#include "gpumem/llm/llm_memory.h"

#include <algorithm>

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/common/units.h"

namespace gpumem::llm {

KvType kv_type(const std::string& name) {
  // Block layouts as ggml-common.h defines them; fp8 as vLLM stores it
  // (one byte, e4m3 or e5m2, scales kept per tensor).
  if (name == "f16" || name == "bf16") return {name, 1, 2};
  if (name == "f32") return {name, 1, 4};
  if (name == "q8_0") return {name, 32, 34};
  if (name == "q4_0") return {name, 32, 18};
  if (name == "fp8") return {name, 1, 1};
  throw InputError(fmt::format("--kv-dtype: '{}' is not one of f16, bf16, f32, q8_0, q4_0, fp8", printable(name)));
}

namespace {

uint64_t row_bytes(const KvType& t, uint64_t values, const char* what) {
  if (values % t.block_values != 0) {
    throw InputError(fmt::format("--kv-dtype {}: a {} row of {} values is not a whole number of {}-value blocks",
                                 t.name, what, values, t.block_values));
  }
  return values / t.block_values * t.block_bytes;
}

}  // namespace

KvCache kv_cache_of_layers(const LlmModel& m, const KvType& type, uint64_t tokens, uint32_t first_layer,
                           uint32_t end_layer) {
  KvCache kv;
  const uint64_t k_row = row_bytes(type, uint64_t{m.n_head_kv} * m.head_dim_k, "K");
  const uint64_t v_row = row_bytes(type, uint64_t{m.n_head_kv} * m.head_dim_v, "V");
  for (uint32_t i = first_layer; i < std::min(end_layer, m.n_layer); ++i) {
    const bool windowed = m.layer_is_windowed(i);
    const uint64_t kept = windowed ? std::min(tokens, m.sliding_window) : tokens;
    kv.bytes_per_token += k_row + v_row;
    kv.k_bytes += k_row * kept;
    kv.v_bytes += v_row * kept;
    kv.windowed_layers += windowed ? 1 : 0;
  }
  kv.bytes = kv.k_bytes + kv.v_bytes;
  return kv;
}

KvCache kv_cache(const LlmModel& m, const KvType& type, uint64_t tokens) {
  return kv_cache_of_layers(m, type, tokens, 0, m.n_layer);
}

namespace {

constexpr uint64_t kF32 = 4;

uint64_t div_up(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

struct Stage {
  std::string name;
  std::vector<ForwardTerm> terms;
  uint64_t bytes() const {
    uint64_t b = 0;
    for (const auto& t : terms) b += t.bytes;
    return b;
  }
};

}  // namespace

ForwardPeak forward_peak(const LlmModel& m, const ForwardShape& s) {
  const uint64_t tp = std::max<uint32_t>(1, s.tensor_parallel);
  const uint64_t T = std::max<uint64_t>(1, s.tokens), C = std::max<uint64_t>(1, s.kv_tokens);
  const uint64_t O = s.outputs == 0 ? T : s.outputs;
  const uint64_t H = div_up(m.n_head, tp), Hkv = div_up(m.n_head_kv, tp);
  const uint64_t F = div_up(std::max<uint64_t>(m.n_ff, 1) * std::max<uint32_t>(1, m.n_expert_used), tp);
  const uint64_t V = div_up(m.n_vocab, tp);
  const uint64_t E = m.n_embd;
  auto rows = [&](const std::string& name, uint64_t width, uint64_t n, const std::string& what) {
    return ForwardTerm{name, fmt::format("{} x {} tokens x 4 B", what, n), width * n * kF32};
  };
  // Inputs stay allocated for the whole graph: token ids, positions, the
  // output ids and the attention mask (padded to 64 query rows; f16 for
  // flash attention, f32 otherwise).
  const uint64_t mask_rows = div_up(T, 64) * 64;
  const uint64_t mask_elt = s.flash_attention ? 2 : 4;
  const std::vector<ForwardTerm> inputs = {
      {"attention mask", fmt::format("{} cached x {} query rows x {} B", C, mask_rows, mask_elt),
       C * mask_rows * mask_elt},
      {"token ids, positions, output ids", fmt::format("(2 x {} + {}) x 4 B", T, O), (2 * T + O) * 4},
  };
  auto with_inputs = [&](std::string name, std::vector<ForwardTerm> terms) {
    terms.insert(terms.end(), inputs.begin(), inputs.end());
    return Stage{std::move(name), std::move(terms)};
  };
  const ForwardTerm residual = rows("residual stream", E, T, fmt::format("{} embd", E));
  const ForwardTerm normed = rows("normalized input", E, T, fmt::format("{} embd", E));
  const ForwardTerm q = rows("Q", H * m.head_dim_k, T, fmt::format("{} heads x {} dims", H, m.head_dim_k));
  const ForwardTerm k =
      rows("K (before the cache copy)", Hkv * m.head_dim_k, T, fmt::format("{} KV heads x {} dims", Hkv, m.head_dim_k));
  const ForwardTerm v =
      rows("V (before the cache copy)", Hkv * m.head_dim_v, T, fmt::format("{} KV heads x {} dims", Hkv, m.head_dim_v));
  const ForwardTerm attn_out =
      rows("attention output", H * m.head_dim_v, T, fmt::format("{} heads x {} dims", H, m.head_dim_v));

  std::vector<Stage> stages;
  stages.push_back(with_inputs("Q, K, V projections", {residual, normed, q, k, v}));
  if (s.flash_attention) {
    stages.push_back(with_inputs("attention", {residual, q, attn_out}));
  } else {
    // Without flash attention the scores of every head against every cached
    // token are one f32 tensor; softmax runs in place on it.
    const ForwardTerm scores{"attention scores (KQ)", fmt::format("{} cached x {} tokens x {} heads x 4 B", C, T, H),
                             C * T * H * kF32};
    stages.push_back(with_inputs("attention", {residual, q, scores, attn_out}));
  }
  const ForwardTerm gate = rows("FFN gate", F, T, fmt::format("{} ff", F));
  const ForwardTerm up = rows("FFN up", F, T, fmt::format("{} ff", F));
  const ForwardTerm act = rows("FFN gate x up", F, T, fmt::format("{} ff", F));
  stages.push_back(with_inputs("feed-forward", {residual, normed, gate, up, act}));
  const ForwardTerm logits{"logits", fmt::format("{} vocab x {} outputs x 4 B", V, O), V * O * kF32};
  if (s.with_output)
    stages.push_back(with_inputs("output", {residual, rows("final norm", E, O, fmt::format("{} embd", E)), logits}));

  const auto top = std::max_element(stages.begin(), stages.end(),
                                    [](const Stage& a, const Stage& b) { return a.bytes() < b.bytes(); });
  return {top->bytes(), top->name, top->terms};
}

}  // namespace gpumem::llm
