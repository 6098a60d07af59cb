// plan_llm: the figures of `gpumem llm`, each from the model's tensors and
// shape, and the searches over context, batch and layers that use them.
#include "gpumem/llm/llm_fit.h"
#include "gpumem/common/flag_names.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/llm/ollama_estimate.h"
#include "gpumem/weights/gguf.h"
#include "gpumem/weights/quantize_file.h"
#include "llm/model_sources.h"

namespace gpumem::llm {
namespace {

// Bounds that keep every size below 2^63 with check_shape's (a cache of
// 2^26 cells, forwards of 2^16 tokens); far past what any engine runs.
constexpr uint64_t kMaxCells = 1ull << 26;
constexpr uint64_t kMaxUbatch = 1ull << 16;

// The largest n in [lo, hi] with ok(n), given ok is true up to some point
// and false after; lo - 1 when ok(lo) is false.
template <typename Ok>
uint64_t largest(uint64_t lo, uint64_t hi, Ok ok) {
  if (!ok(lo)) return lo - 1;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo + 1) / 2;
    if (ok(mid))
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

uint64_t scaled(uint64_t bytes, uint64_t num, uint64_t den) { return bytes / den * num + bytes % den * num / den; }

class Sizer {
 public:
  Sizer(const LlmModel& m, const LlmRequest& r, const KvTypes& kv) : m_(m), r_(r), kv_(kv) {
    layer_bytes_.assign(m.n_layer, 0);
    for (const auto& t : m.tensors) {
      if (t.layer >= 0 && static_cast<uint32_t>(t.layer) < m.n_layer) {
        layer_bytes_[t.layer] += t.bytes;
      } else if (t.name == "token_embd.weight" || t.name.find("embed_tokens") != std::string::npos) {
        embedding_bytes_ += t.bytes;
      } else {
        output_bytes_ += t.bytes;  // the final norm and the output matrix
      }
    }
    // Tied embeddings: the output reads the embedding matrix, which a GPU
    // holding the output layer (and not the input) needs its own copy of.
    if (m.tied_embeddings) tied_output_bytes_ = embedding_bytes_;
  }

  uint64_t weights() const { return m_.weight_bytes(); }
  uint64_t layer(uint32_t i) const { return layer_bytes_[i]; }
  uint64_t largest_layer() const {
    return layer_bytes_.empty() ? 0 : *std::max_element(layer_bytes_.begin(), layer_bytes_.end());
  }
  uint64_t embedding() const { return embedding_bytes_; }
  uint64_t output() const { return output_bytes_ + tied_output_bytes_; }

  bool ollama() const { return r_.engine.kind == EngineKind::kOllama; }
  uint64_t padding() const { return r_.flash_attention ? r_.engine.ctx_padding : r_.engine.ctx_padding_no_flash; }

  KvCache kv(uint64_t context, uint64_t batch, uint32_t first = 0, uint32_t end = ~0u) const {
    if (ollama()) {
      // ollama's own figure: every layer's cells unpadded, priced per value.
      const OllamaEstimate e = ollama_estimate(m_, context, r_.ubatch, batch, kv_.k.name);
      KvCache kv;
      kv.cells = context * batch;
      kv.window_cells = kv.cells;
      for (uint32_t i = first; i < std::min(end, m_.n_layer); ++i) kv.bytes += e.kv_per_layer[i];
      kv.k_bytes = kv.bytes / 2;
      kv.v_bytes = kv.bytes - kv.k_bytes;
      kv.bytes_per_token = kv_cache(m_, kv_, 1).bytes_per_token;
      return kv;
    }
    return kv_cache(m_, kv_, context, batch, first, end, r_.ubatch, {padding(), r_.engine.window_cache});
  }
  // llama.cpp reserves for min(n_ctx, n_ubatch) tokens against every cell.
  ForwardShape forward_shape(uint64_t context, uint64_t batch) const {
    ForwardShape s;
    s.kv_tokens = kv_cells(context, batch, padding());
    s.graph = r_.engine.graph;
    s.tokens = std::min(r_.ubatch, context * batch);
    s.flash_attention = r_.flash_attention;
    s.k_quantized = kv_.k.quantized();
    s.v_quantized = kv_.v.quantized();
    return s;
  }
  ForwardPeak forward(uint64_t context, uint64_t batch, uint32_t tp = 1, bool with_output = true,
                      bool partial_offload = false) const {
    if (ollama()) {
      const OllamaEstimate e = ollama_estimate(m_, context, r_.ubatch, batch, kv_.k.name);
      if (partial_offload)
        return {e.graph_partial_bytes,
                "ollama graph, partial offload",
                {{"graph", "ollama's " + e.formula + " partial-offload formula", e.graph_partial_bytes}}};
      const auto top = std::max_element(e.full_terms.begin(), e.full_terms.end(),
                                        [](const ForwardTerm& a, const ForwardTerm& b) { return a.bytes < b.bytes; });
      return {e.graph_full_bytes, "ollama graph (" + e.formula + "): " + top->name, e.full_terms};
    }
    ForwardShape s = forward_shape(context, batch);
    s.tensor_parallel = tp;
    s.with_output = with_output;
    return forward_peak(m_, s);
  }

  GpuMemory single(uint64_t context, uint64_t batch) const {
    return {weights(), kv(context, batch).bytes, forward(context, batch).bytes, r_.overhead_bytes, 0};
  }

  // Per GPU with each matrix split `tp` ways and vectors replicated; KV
  // heads divide too, one per GPU at least (replicated past that).
  GpuMemory tensor_parallel(uint64_t context, uint64_t batch, uint32_t tp) const {
    GpuMemory g;
    for (const auto& t : m_.tensors) g.weights_bytes += t.shape.size() >= 2 ? (t.bytes + tp - 1) / tp : t.bytes;
    const uint64_t kv_heads = (m_.n_head_kv + tp - 1) / tp;
    g.kv_bytes = scaled(kv(context, batch).bytes, kv_heads, m_.n_head_kv);
    g.activation_bytes = forward(context, batch, tp).bytes;
    g.overhead_bytes = r_.overhead_bytes;
    return g;
  }

  // Contiguous layers per GPU, the first ones one layer longer when the
  // count does not divide.
  std::vector<uint32_t> pipeline_layers(uint32_t gpus) const {
    std::vector<uint32_t> n(gpus, m_.n_layer / gpus);
    for (uint32_t i = 0; i < m_.n_layer % gpus; ++i) ++n[i];
    return n;
  }
  std::vector<GpuMemory> pipeline(uint64_t context, uint64_t batch, uint32_t gpus) const {
    std::vector<GpuMemory> out;
    const std::vector<uint32_t> layers = pipeline_layers(gpus);
    uint32_t first = 0;
    for (uint32_t g = 0; g < gpus; ++g) {
      const uint32_t end = first + layers[g];
      GpuMemory mem;
      for (uint32_t i = first; i < end; ++i) mem.weights_bytes += layer_bytes_[i];
      const bool last = g + 1 == gpus;
      if (g == 0) mem.weights_bytes += embedding_bytes_;
      if (last) mem.weights_bytes += output_bytes_ + (gpus > 1 ? tied_output_bytes_ : 0);
      mem.kv_bytes = kv(context, batch, first, end).bytes;
      mem.activation_bytes = forward(context, batch, 1, last).bytes;
      mem.overhead_bytes = r_.overhead_bytes;
      out.push_back(mem);
      first = end;
    }
    return out;
  }

  // llama.cpp's -ngl L: the last L layers and their cache on the GPU, and
  // the output layer once all of them are.
  LayerOffload offload(uint64_t context, uint64_t batch, uint32_t gpu_layers) const {
    LayerOffload o;
    o.gpu_layers = gpu_layers;
    const uint32_t first = m_.n_layer - gpu_layers;
    for (uint32_t i = first; i < m_.n_layer; ++i) o.gpu.weights_bytes += layer_bytes_[i];
    if (gpu_layers == m_.n_layer) o.gpu.weights_bytes += output();
    o.gpu.kv_bytes = kv(context, batch, first, m_.n_layer).bytes;
    o.gpu.activation_bytes = forward(context, batch, 1, true, gpu_layers < m_.n_layer).bytes;
    o.gpu.overhead_bytes = r_.overhead_bytes;
    const uint64_t all = weights() + tied_output_bytes_ + kv(context, batch).bytes;
    o.host_bytes = all - o.gpu.weights_bytes - o.gpu.kv_bytes;
    return o;
  }

  // Every layer's cache on the GPU, `resident` layers' weights too, the
  // rest streamed through two staging buffers.
  StreamingPlan streaming(uint64_t context, uint64_t batch, uint32_t resident) const {
    StreamingPlan s;
    s.resident_layers = resident;
    s.streamed_layers = m_.n_layer - resident;
    for (uint32_t i = 0; i < resident; ++i) s.gpu.weights_bytes += layer_bytes_[i];
    s.gpu.weights_bytes += output();
    for (uint32_t i = resident; i < m_.n_layer; ++i) s.streamed_bytes_per_token += layer_bytes_[i];
    s.staging_bytes = s.streamed_layers == 0 ? 0 : 2 * largest_layer();
    s.gpu.other_bytes = s.staging_bytes;
    s.gpu.kv_bytes = kv(context, batch).bytes;
    s.gpu.activation_bytes = forward(context, batch).bytes;
    s.gpu.overhead_bytes = r_.overhead_bytes;
    s.seconds_per_token = static_cast<double>(s.streamed_bytes_per_token) / r_.pcie_bytes_per_second;
    return s;
  }

 private:
  const LlmModel& m_;
  const LlmRequest& r_;
  KvTypes kv_;
  std::vector<uint64_t> layer_bytes_;
  uint64_t embedding_bytes_ = 0, output_bytes_ = 0, tied_output_bytes_ = 0;
};

uint64_t largest_total(const std::vector<GpuMemory>& gpus) {
  uint64_t m = 0;
  for (const auto& g : gpus) m = std::max(m, g.total());
  return m;
}

}  // namespace

namespace {

// The levels llama.cpp users choose among, largest first: what fits is the
// first question every VRAM calculator answers.
constexpr const char* kQuantLevels[] = {"f16", "q8_0", "q6_k", "q5_k_m", "q4_k_m", "q3_k_m", "q2_k"};

// Whether most weight bytes are at full or half precision (a checkpoint as
// trained, not a GGUF someone quantized).
bool unquantized(const LlmModel& m) {
  return m.weight_dtype == "F32" || m.weight_dtype == "F16" || m.weight_dtype == "BF16";
}

}  // namespace

LlmModel requantized(LlmModel model, const std::string& quant) {
  if (weights::quantize_recipe_named(quant) == nullptr) {
    std::string names;
    for (const auto& r : weights::quantize_recipes()) names += (names.empty() ? "" : ", ") + std::string(r.name);
    throw InputError(fmt::format(GPUMEM_FLAG_QUANT ": '{}' is not one of {}", printable(quant), names));
  }
  // The types `gpumem quantize --type` would write, as llama-quantize
  // chooses them, pricing every tensor as if from full precision.
  std::vector<weights::TensorShape> shapes;
  for (const auto& t : model.tensors) shapes.push_back({t.name, "F32", t.shape});
  weights::ModelHints hints;
  hints.architecture = model.architecture;
  hints.n_layer = static_cast<int>(model.n_layer);
  hints.n_expert = static_cast<int>(model.n_expert);
  hints.llama_70b = model.architecture == "llama" && model.n_layer == 80 && model.n_head > model.n_head_kv;
  weights::QuantizeOptions options;
  options.type = quant;
  const std::vector<weights::TypeChoice> choices = weights::choose_types(shapes, hints, options);
  for (size_t i = 0; i < model.tensors.size(); ++i) {
    auto& t = model.tensors[i];
    t.dtype = std::string(weights::ggml_type(choices[i].type)->name);
    t.bytes = weights::ggml_tensor_bytes(choices[i].type, t.shape);
  }
  model.weight_dtype = dominant_dtype(model.tensors);
  return model;
}

LlmPlan plan_llm(LlmModel model, const LlmRequest& request) {
  if (request.gpu_bytes == 0)
    throw InputError(GPUMEM_FLAG_GPU ": give the memory of one GPU, e.g. " GPUMEM_FLAG_GPU " 24GiB");
  if (request.gpus == 0) throw InputError(GPUMEM_FLAG_GPUS ": at least 1");
  if (request.batch == 0 || request.ubatch == 0)
    throw InputError(GPUMEM_FLAG_BATCH " and " GPUMEM_FLAG_UBATCH ": at least 1");
  if (request.ubatch > kMaxUbatch) throw InputError(fmt::format(GPUMEM_FLAG_UBATCH ": at most {}", kMaxUbatch));
  LlmPlan p;
  std::string quant = request.quant;
  if (quant.empty() && request.engine.is_ollama() && unquantized(model)) {
    quant = "q4_k_m";
    p.default_quant = quant;
  }
  p.model = quant.empty() ? std::move(model) : requantized(std::move(model), quant);
  p.request = request;
  p.context = request.context != 0 ? request.context : p.model.n_ctx_train;
  if (p.context == 0)
    throw InputError(
        fmt::format("{}: the model states no training context; give " GPUMEM_FLAG_CONTEXT, p.model.source));
  if (p.context > kMaxCells / request.batch)
    throw InputError(fmt::format(GPUMEM_FLAG_CONTEXT " x " GPUMEM_FLAG_BATCH
                                                     ": {} x {} tokens, more than the {} gpumem accepts",
                                 p.context, request.batch, kMaxCells));
  p.kv_types = kv_types(request.kv_dtype);
  const LlmModel& m = p.model;
  const Sizer sizer(m, request, p.kv_types);
  const uint64_t gpu = request.gpu_bytes;
  const uint32_t n = request.gpus;

  p.kv = sizer.kv(p.context, request.batch);
  p.forward = sizer.forward(p.context, request.batch);
  p.single = sizer.single(p.context, request.batch);

  // Per-GPU peak of the placement the answers use: one GPU, or tensor
  // parallel where the heads divide, pipeline parallel otherwise.
  const bool tp_valid = n > 1 && m.n_head % n == 0 && m.n_layer > 0;
  auto need = [&](uint64_t context, uint64_t batch) {
    if (n == 1) return sizer.offload(context, batch, m.n_layer).gpu.total();
    if (tp_valid) return sizer.tensor_parallel(context, batch, n).total();
    return largest_total(sizer.pipeline(context, batch, n));
  };
  p.verdict = {gpu, need(p.context, request.batch)};
  if (n > 1) {
    if (tp_valid) {
      p.placed = sizer.tensor_parallel(p.context, request.batch, n);
    } else {
      for (const GpuMemory& g : sizer.pipeline(p.context, request.batch, n))
        if (g.total() >= p.placed.total()) p.placed = g;
    }
  }
  if (n == 1) {
    const LayerOffload all = sizer.offload(p.context, request.batch, m.n_layer);
    p.placed = all.gpu;
    p.host_bytes = all.host_bytes;
    for (const char* level : kQuantLevels) {
      if (weights::quantize_recipe_named(level) == nullptr) continue;
      LlmRequest q = request;
      q.quant.clear();
      const LlmModel requantized_model = requantized(p.model, level);
      const Sizer at(requantized_model, q, p.kv_types);
      p.quant_levels.push_back({level,
                                requantized_model.weight_bytes(),
                                {gpu, at.offload(p.context, request.batch, m.n_layer).gpu.total()}});
    }
  }
  // The search stops at the training context, or at the context asked
  // for when that is longer.
  const uint64_t cap =
      std::min(m.n_ctx_train != 0 ? std::max(m.n_ctx_train, p.context) : kMaxCells, kMaxCells / request.batch);
  p.max_context = largest(1, cap, [&](uint64_t c) { return need(c, request.batch) <= gpu; });
  p.max_context_capped = p.max_context == cap && m.n_ctx_train != 0 && need(cap + 1, request.batch) <= gpu;
  p.max_batch = largest(1, kMaxCells / p.context, [&](uint64_t b) { return need(p.context, b) <= gpu; });

  if (n > 1) {
    MultiGpu mg;
    mg.gpus = n;
    mg.tensor_parallel_valid = tp_valid;
    mg.tensor_parallel = sizer.tensor_parallel(p.context, request.batch, n);
    mg.tensor_parallel_fits = tp_valid && mg.tensor_parallel.total() <= gpu;
    mg.pipeline_layers = sizer.pipeline_layers(n);
    mg.pipeline = sizer.pipeline(p.context, request.batch, n);
    mg.pipeline_fits = largest_total(mg.pipeline) <= gpu;
    p.multi = mg;
  }

  const uint64_t layers = largest(0, m.n_layer, [&](uint64_t l) {
    return sizer.offload(p.context, request.batch, static_cast<uint32_t>(l)).gpu.total() <= gpu;
  });
  p.offload = sizer.offload(p.context, request.batch, static_cast<uint32_t>(layers == ~0ull ? 0 : layers));
  p.offload.fits = layers != ~0ull;

  const uint64_t resident = largest(0, m.n_layer, [&](uint64_t l) {
    return sizer.streaming(p.context, request.batch, static_cast<uint32_t>(l)).gpu.total() <= gpu;
  });
  const bool streaming_possible = resident != ~0ull;
  p.streaming = sizer.streaming(p.context, request.batch, streaming_possible ? static_cast<uint32_t>(resident) : 0);
  p.streaming.possible = streaming_possible;
  return p;
}

}  // namespace gpumem::llm
