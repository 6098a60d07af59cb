// ollama's GraphSize (fs/ggml/ggml.go at ollama v0.12.10), restated: the
// same terms in the same integer arithmetic, so that the figures equal the
// ones ollama logs. Its authors fitted them per architecture; gpumem
// carries them as facts about ollama, not as a model of llama.cpp.
#include "gpumem/llm/ollama_estimate.h"

#include <algorithm>

#include <fmt/format.h>

#include "gpumem/llm/model_families.h"

namespace gpumem::llm {
namespace {

// Bytes per cached value as ollama prices a KV type (q8_0 as 1, q4_0 as
// 1/2: it ignores the blocks' scales).
double kv_value_bytes(const std::string& type) {
  if (type == "q8_0") return 1;
  if (type == "q4_0") return 0.5;
  if (type == "f32") return 4;
  return 2;
}

bool has_tensor(const LlmModel& m, const std::string& name) {
  return std::any_of(m.tensors.begin(), m.tensors.end(), [&](const LlmTensor& t) { return t.name == name; });
}

}  // namespace

OllamaEstimate ollama_estimate(const LlmModel& m, uint64_t num_ctx, uint64_t num_batch, uint64_t num_parallel,
                               const std::string& kv_type) {
  OllamaEstimate e;
  const uint64_t context = num_ctx * std::max<uint64_t>(1, num_parallel);
  const uint64_t batch = std::min(num_batch, num_ctx);  // llm/memory.go: min(NumCtx, NumBatch)
  const uint64_t E = m.n_embd, H = m.n_head, Hkv = m.n_head_kv, V = m.n_vocab;
  const uint64_t dk = m.head_dim_k, dv = m.head_dim_v, d = m.n_head ? m.n_embd / m.n_head : 0;
  const double per_value = kv_value_bytes(kv_type);
  const std::string& arch = m.architecture;
  for (uint32_t i = 0; i < m.n_layer; ++i) {
    uint64_t cells = context;
    // Gemma 3's windowed layers: five of every six hold the window of each
    // sequence and one batch.
    if (arch == "gemma3" && (i + 1) % 6 != 0) cells = num_parallel * m.sliding_window + batch;
    e.kv_per_layer.push_back(static_cast<uint64_t>(static_cast<double>(cells * (dk + dv) * Hkv) * per_value));
    e.kv_bytes += e.kv_per_layer.back();
  }
  const auto term = [](std::string name, std::string formula, uint64_t bytes) {
    return ForwardTerm{std::move(name), std::move(formula), bytes};
  };
  const ForwardTerm logits =
      term("output", fmt::format("4 x {} x ({} embd + {} vocab)", batch, E, V), 4 * batch * (E + V));
  const ModelFamily* family = model_family(arch);
  const OllamaGraph graph = family != nullptr ? family->ollama : OllamaGraph::kFallback;
  if (graph == OllamaGraph::kLlama) {
    e.formula = "llama";
    e.full_terms = {
        term("attention", fmt::format("4 x {} x (1 + 4 x {} + {} ctx x (1 + {} heads))", batch, E, context, H),
             4 * batch * (1 + 4 * E + context * (1 + H))),
        logits};
    e.graph_partial_bytes = 4 * batch * E + std::max(4 * batch * (1 + E + std::max(context, E)) + E * E * 9 / 16 +
                                                         4 * context * (batch * H + d * Hkv),
                                                     4 * batch * (E + V) + E * V * 105 / 128);
    if (m.n_expert > 0 && !has_tensor(m, "blk.0.ffn_gate_exps.weight")) {
      // ollama's Mixtral 8x7B case (experts stored apart, ffn_gate.0)
      const uint64_t F = m.n_ff;
      e.formula = "llama (mixtral 8x7b)";
      e.full_terms = {term(
          "attention and experts",
          fmt::format("4 x {} x (2 + 3 x {} + {} ctx x (1 + {} heads) + 2 x {} + {} ff)", batch, E, context, H, Hkv, F),
          4 * batch * (2 + 3 * E + context * (1 + H) + 2 * Hkv + F))};
    }
  } else if (graph == OllamaGraph::kGemma) {
    e.formula = arch;
    e.full_terms = {logits, term("attention",
                                 fmt::format("4 x {} x (2 + {} ctx + {} ctx x {} heads + 2 x {} + 2 x {} x {})", batch,
                                             context, context, H, E, dk, H),
                                 4 * batch * (2 + context + context * H + 2 * E + 2 * dk * H))};
    e.graph_partial_bytes = std::max(
        4 * E * batch + E * V * 105 / 128 + 4 * V * batch,
        4 * batch * (2 * E + 1 + 2 * dk * H + context + context * H) + 4 * dk * context * 8 + E * dk * H * 9 / 16);
  } else if (graph == OllamaGraph::kQwen2) {
    e.formula = "qwen2";
    e.full_terms = {
        logits, term("attention", fmt::format("4 x {} x (1 + 2 x {} + {} ctx x (1 + {} heads))", batch, E, context, H),
                     4 * batch * (1 + 2 * E + context + context * H))};
    e.graph_partial_bytes = std::max(4 * batch * (E + V) + E * V * 105 / 128,
                                     4 * (batch * (1 + 2 * E + context * (1 + H)) + E * (1 + context)));
  } else if (graph == OllamaGraph::kCommandR) {
    e.formula = "command-r";
    e.full_terms = {
        logits, term("attention", fmt::format("4 x {} x (2 + 4 x {} + {} ctx x (1 + {} heads))", batch, E, context, H),
                     4 * batch * (2 + 4 * E + context * (1 + H)))};
    e.graph_partial_bytes = std::max(4 * batch * (E + V) + E * V * 105 / 128,
                                     4 * batch * (1 + 2 * E + context * (1 + H)) + 4 * E * context + E * E * 9 / 16);
  } else if (graph == OllamaGraph::kPhi2) {
    e.formula = "phi2";
    e.full_terms = {
        logits, term("attention", fmt::format("4 x {} x (1 + 4 x {} + {} ctx x (1 + {} heads))", batch, E, context, H),
                     4 * batch * (1 + 4 * E + context + context * H))};
    e.graph_partial_bytes =
        std::max(4 * batch * (2 * E + V) + E * V * 105 / 128, 4 * batch * (2 + 3 * E + context + context * H));
  } else {
    // Other architectures: llm/memory.go's fallback, a sixth of the KV
    // cache per query head sharing a KV head, for both offloads.
    e.formula = "fallback (heads / KV heads x KV cache / 6)";
    const uint64_t gqa = H / std::max<uint64_t>(1, Hkv);
    e.graph_partial_bytes = gqa * e.kv_bytes / 6;
    e.full_terms = {term("graph", fmt::format("{} / {} x {} B / 6", H, Hkv, e.kv_bytes), e.graph_partial_bytes)};
  }
  for (const auto& t : e.full_terms) e.graph_full_bytes = std::max(e.graph_full_bytes, t.bytes);
  if (e.graph_partial_bytes == 0) e.graph_partial_bytes = e.graph_full_bytes;
  return e;
}

}  // namespace gpumem::llm
