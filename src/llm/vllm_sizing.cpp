// vLLM's start-up sizing (llm/vllm_sizing.h). What vLLM measures (the
// profile run's peak, memory outside PyTorch) is estimated here; every step
// after it is vLLM's own arithmetic (tests/data/llm/public/vllm_sizing_notes.md).
#include "gpumem/llm/vllm_sizing.h"
#include "gpumem/common/flag_names.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gpumem/common/device_defaults.h"
#include "gpumem/common/error.h"
#include "gpumem/common/units.h"
#include "gpumem/llm/vllm_quant.h"

namespace gpumem::llm {
namespace {

// CUDA graphs of every captured batch size, as vLLM 0.21's own estimate
// printed it: 0.52 GiB for Qwen3-8B (LMCache/LMCache#3430), 1.32 GiB for
// the mixture of experts Qwen3.5-35B-A3B (vllm-project/vllm#50722). Two
// logs, so two constants, not a model of the capture.
constexpr uint64_t kGraphBytesDense = 532ull << 20;
constexpr uint64_t kGraphBytesExperts = 1352ull << 20;
constexpr uint64_t kBigGpu = 70ull << 30;  // vLLM's defaults grow on GPUs of 70 GiB and more

// Bytes of one value as vLLM computes: the checkpoint's float type, bf16
// for a quantized one.
uint64_t compute_bytes(const LlmModel& m) { return m.weight_dtype == "F32" ? 4 : 2; }

// Pages of one request of `len` tokens over every layer. V1 keeps only a
// windowed layer's window and one forward (`tokens`) plus a page; V0 keeps
// everything.
uint64_t pages_per_request(const LlmModel& m, const EngineRules& rules, uint64_t len, uint64_t tokens, uint32_t block) {
  uint64_t pages = 0;
  for (uint32_t i = 0; i < m.n_layer; ++i) {
    if (rules.vllm_v1 && m.layer_is_windowed(i))
      pages += div_up(std::min(m.sliding_window - 1 + tokens, len), block) + 1;
    else
      pages += div_up(len, block);
  }
  return pages;
}

}  // namespace

VllmSizing size_vllm(const LlmModel& m, const VllmRequest& request, const EngineRules& rules) {
  VllmSizing s;
  s.rules = rules;
  VllmRequest& r = s.request = request;
  if (r.gpu_bytes == 0)
    throw InputError(GPUMEM_FLAG_GPU ": give the memory of one GPU, e.g. " GPUMEM_FLAG_GPU " 80GiB");
  if (!(r.gpu_memory_utilization > 0 && r.gpu_memory_utilization <= 1))
    throw InputError(fmt::format(GPUMEM_FLAG_GPU_MEMORY_UTILIZATION ": {} is not in (0, 1]", r.gpu_memory_utilization));
  const uint32_t tp = std::max<uint32_t>(1, r.tensor_parallel);
  if (m.n_head % tp != 0)
    throw InputError(
        fmt::format(GPUMEM_FLAG_GPUS " {}: vLLM splits the {} attention heads evenly over the GPUs", tp, m.n_head));
  if (r.block_size == 0) throw InputError(GPUMEM_FLAG_BLOCK_TOKENS ": at least 1");
  if (r.max_model_len == 0) r.max_model_len = m.n_ctx_train;
  if (r.max_model_len == 0)
    throw InputError(fmt::format("{}: the model states no training context; give " GPUMEM_FLAG_CONTEXT, m.source));
  // vLLM's defaults (vllm/engine/arg_utils.py): V0 profiles the whole
  // context unless chunked prefill is on (past 32K tokens); V1 always chunks.
  const bool big = r.gpu_bytes >= kBigGpu;
  if (r.max_num_batched_tokens == 0) {
    if (rules.vllm_v1)
      r.max_num_batched_tokens = big ? 8192 : 2048;
    else
      r.max_num_batched_tokens = r.max_model_len > 32768 ? 2048 : std::max<uint64_t>(r.max_model_len, 2048);
  }
  if (r.max_num_seqs == 0) r.max_num_seqs = rules.vllm_v1 && big ? 1024 : 256;
  if (!r.non_torch_bytes) r.non_torch_bytes = kVllmNonTorchBytes + (tp > 1 ? kVllmNcclBytes : 0);

  const uint64_t a = compute_bytes(m);
  s.budget_bytes = static_cast<uint64_t>(std::floor(static_cast<double>(r.gpu_bytes) * r.gpu_memory_utilization));
  // This rank's share: matrices split, vectors whole; and the rotary
  // embedding's cos/sin cache, one row of head_dim per position.
  for (const auto& t : m.tensors) s.weights_bytes += t.shape.size() >= 2 ? div_up(t.bytes, tp) : t.bytes;
  s.weights_bytes += m.n_ctx_train * m.head_dim_k * a;

  // The profile run: the feed-forward of max_num_batched_tokens tokens
  // (its gate and up projections, their product, and the embedding-wide
  // tensors around them: 3 x (E + F) values a token, fitted to
  // vllm-project/vllm#10517's two runs), then the sampler's f32 logits of
  // one token per dummy sequence.
  const uint64_t T = r.max_num_batched_tokens;
  const uint64_t F = div_up(m.n_ff * std::max<uint32_t>(1, m.n_expert_used), tp);
  const uint64_t forward = T * a * 3 * (m.n_embd + F);
  const uint64_t seqs = std::min(r.max_num_seqs, T);
  const uint64_t sampler = seqs * m.n_vocab * 4;
  if (forward >= sampler) {
    s.activation_bytes = forward;
    s.activation_stage = "forward";
    s.activation_formula = fmt::format("{} tokens x 3 x ({} embd + {} ff) x {} B", T, m.n_embd, F, a);
  } else {
    s.activation_bytes = sampler;
    s.activation_stage = "sampler";
    s.activation_formula = fmt::format("{} sequences x {} vocab x 4 B (f32 logits)", seqs, m.n_vocab);
  }
  s.non_torch_bytes = *r.non_torch_bytes;
  s.cuda_graph_bytes = r.enforce_eager ? 0 : m.n_expert > 0 ? kGraphBytesExperts : kGraphBytesDense;
  s.cuda_graph_in_budget = rules.vllm_graphs_profiled;

  const uint64_t taken =
      s.weights_bytes + s.activation_bytes + s.non_torch_bytes + (s.cuda_graph_in_budget ? s.cuda_graph_bytes : 0);
  s.kv_cache_bytes = static_cast<int64_t>(s.budget_bytes) - static_cast<int64_t>(taken);
  const uint64_t kv_heads = std::max<uint64_t>(1, m.n_head_kv / tp);
  const uint64_t kv_value = r.kv_bytes_per_value != 0 ? r.kv_bytes_per_value : a;
  s.page_bytes = uint64_t{r.block_size} * kv_heads * (m.head_dim_k + m.head_dim_v) * kv_value;
  const uint64_t layer_pages = s.kv_cache_bytes > 0 ? static_cast<uint64_t>(s.kv_cache_bytes) / s.page_bytes : 0;
  s.num_gpu_blocks = m.n_layer == 0 ? 0 : layer_pages / m.n_layer;
  s.kv_tokens = s.num_gpu_blocks * r.block_size;
  const uint64_t pool = s.num_gpu_blocks * m.n_layer;
  const auto pages = [&](uint64_t len) { return pages_per_request(m, rules, len, T, r.block_size); };
  s.blocks_per_request = pages(r.max_model_len);
  s.max_concurrency = s.blocks_per_request ? static_cast<double>(pool) / static_cast<double>(s.blocks_per_request) : 0;
  s.fits = s.blocks_per_request <= pool && pool > 0;
  // vLLM's estimate_max_model_len: the longest request whose pages fit.
  uint64_t lo = 0, hi = r.max_model_len;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo + 1) / 2;
    if (pages(mid) <= pool)
      lo = mid;
    else
      hi = mid - 1;
  }
  s.max_model_len_that_fits = lo;
  s.headroom_bytes = static_cast<int64_t>(r.gpu_bytes) - static_cast<int64_t>(s.budget_bytes) -
                     static_cast<int64_t>(s.cuda_graph_in_budget ? 0 : s.cuda_graph_bytes) -
                     static_cast<int64_t>(kDefaultCudaOverheadBytes);

  // The least GPU that gives one request its pages: the layers' pages of
  // the request, rounded up to whole blocks per layer, on top of what is
  // taken, divided by the share vLLM may use. vLLM's own test (fits) stays
  // the truth at this GPU where rounding differs.
  const uint64_t blocks_per_layer = m.n_layer == 0 ? 0 : div_up(s.blocks_per_request, m.n_layer);
  const uint64_t least_budget = taken + blocks_per_layer * m.n_layer * s.page_bytes;
  uint64_t least = static_cast<uint64_t>(std::ceil(static_cast<double>(least_budget) / r.gpu_memory_utilization));
  if (s.fits && least > r.gpu_bytes) least = r.gpu_bytes;
  if (!s.fits && least <= r.gpu_bytes) least = r.gpu_bytes + 1;
  s.verdict = {r.gpu_bytes, least};

  if (r.target_concurrency != 0) {
    const uint64_t need = r.target_concurrency * s.blocks_per_request * s.page_bytes;
    s.utilization_for_target = static_cast<double>(taken + need) / static_cast<double>(r.gpu_bytes);
    lo = 0;
    hi = r.max_model_len;
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo + 1) / 2;
      if (r.target_concurrency * pages(mid) <= pool)
        lo = mid;
      else
        hi = mid - 1;
    }
    s.max_model_len_for_target = lo;
  }
  return s;
}

std::vector<VllmQuantLevel> vllm_quant_levels(const LlmModel& m, const VllmRequest& request, const EngineRules& rules) {
  std::vector<VllmQuantLevel> levels;
  for (const auto& format : vllm_quant_formats()) {
    const VllmSizing s = size_vllm(vllm_quantized(m, format), request, rules);
    levels.push_back({std::string(format.name), s.weights_bytes, s.kv_tokens, s.max_concurrency, s.verdict});
  }
  return levels;
}

}  // namespace gpumem::llm
