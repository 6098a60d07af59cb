// The decoder's forward, kernel by kernel, as Hugging Face's modeling code
// runs it in eager PyTorch (transformers' modeling_llama, modeling_qwen2,
// modeling_mistral, modeling_mixtral, modeling_gemma2; peft's LoRA layer;
// bitsandbytes' Linear4bit). Each tensor a kernel allocates is a value with
// its size and type; views share storage; what each kernel keeps for
// backward is op_rules.cpp's.
#include "finetune/decoder_step.h"
#include "gpumem/common/flag_names.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/common/units.h"
#include "gpumem/llm/model_families.h"
#include "gpumem/weights/bnb_quantize.h"

namespace gpumem::finetune {
namespace {

using llm::LlmModel;

// Kinds whose outputs never need a gradient.
const std::set<std::string, std::less<>> kNoGradient = {"constant"};

uint64_t bytes_of(DType t) { return static_cast<uint64_t>(dtype_bits(t) / 8); }

// QLoRA's storage of a frozen [rows, cols] weight: bitsandbytes' NF4 (two
// codes a byte, an fp32 absmax per 64 values; with double quantization an
// 8-bit absmax per 64 and an fp32 one per 256 of those) or LLM.int8 (a
// byte a value and an fp32 scale per row).
uint64_t quantized_bytes(BaseQuant q, uint64_t rows, uint64_t cols) {
  const uint64_t n = rows * cols;
  const uint64_t blocks = div_up(n, weights::kNf4BlockSize);
  switch (q) {
    case BaseQuant::kNf4: return div_up(n, 2) + blocks * 4;
    case BaseQuant::kNf4DoubleQuant: return div_up(n, 2) + blocks + div_up(blocks, weights::kNf4NestedBlockSize) * 4;
    case BaseQuant::kInt8: return n + rows * 4;
  }
  return n;
}

class Builder {
 public:
  Builder(const LlmModel& m, const FinetuneOptions& o) : m_(m), o_(o), family_(llm::model_family(m.architecture)) {
    wdt_ = o.train.precision == train::Precision::kBf16 ? DType::BFloat16 : DType::Float;
    adt_ = wdt_;
    b_ = o.micro_batch;
    s_ = o.seq;
    tokens_ = b_ * s_;
    hd_ = m.head_dim_k != 0 ? m.head_dim_k : m.n_embd / std::max<uint32_t>(1, m.n_head);
  }

  DecoderStep build() {
    check();
    const uint64_t E = m_.n_embd, V = m_.n_vocab;
    const bool gemma = is_gemma();
    // Embedding, rotary tables and the causal mask, once per forward.
    const int ids = input("input_ids", tokens_ * 8, DType::Int64, {static_cast<int64_t>(b_), static_cast<int64_t>(s_)});
    const int embed = param("model.embed_tokens.weight", {V, E}, trainable_embeddings());
    int h = op("Gather", "/model/embed_tokens/embedding", {embed, ids}, act({b_, s_, E}));
    if (targeted("embed")) h = embedding_adapter(ids, h);
    if (gemma) h = op("Mul", "/model/normalizer", {h, -1}, act({b_, s_, E}));
    if (hook_input_grads()) hooked_ = h;
    rotary_tables();
    if (o_.attention == Attention::kEager) {
      mask_ = op("constant", "/model/causal_mask", {}, value("causal mask", b_ * s_ * s_ * bytes_of(adt_), adt_, {}));
    }
    for (uint32_t i = 0; i < m_.n_layer; ++i) h = layer(i, h);
    h = rms_norm("/model/norm", "model.norm.weight", h, trainable_head());
    const int head = m_.tied_embeddings ? embed : param("lm_head.weight", {V, E}, trainable_head());
    int logits = op("linear", "/lm_head/linear", {h, head}, act({b_ * s_, V}));
    // LoRA on lm_head (peft's target_modules=["lm_head", ...]): an adapter
    // beside a frozen head, tied or not; its B output is logits-sized.
    if (targeted("head")) logits = adapter("lm_head", "/lm_head", h, logits, b_ * s_, E, V);
    if (softcapping()) logits = softcap("/final_logit_softcapping", logits, {b_ * s_, V});
    // The forward computes the loss and returns the logits beside it: they
    // live until the loss is done (a Trainer's compute_loss drops them
    // before backward).
    out_.graph.values[static_cast<size_t>(logits)].held_through_loss = true;
    // The loss (transformers' ForCausalLMLoss): logits.float(); from 4.46
    // the labels are padded and shifted, before it the logits were sliced
    // and made contiguous, a copy. cross_entropy is the simulation's.
    if (adt_ != DType::Float) {
      // The loss function holds its fp32 copy in a local until it returns.
      logits = op("Cast", "/loss/float", {logits}, act({b_ * s_, V}, DType::Float));
      out_.graph.values[static_cast<size_t>(logits)].held_through_loss = true;
    }
    if (o_.shift_copy) logits = op("clone", "/loss/shift_logits", {logits}, act({b_ * (s_ - 1), V}, DType::Float));
    out_.graph.graph_outputs = {logits};
    propagate();
    return std::move(out_);
  }

 private:
  const LlmModel& m_;
  const FinetuneOptions& o_;
  const llm::ModelFamily* family_;
  DType wdt_, adt_;
  uint64_t b_ = 1, s_ = 1, tokens_ = 1, hd_ = 0;
  int cos_ = -1, sin_ = -1, mask_ = -1, hooked_ = -1;
  DecoderStep out_;

  // What differs by family (transformers' modeling_<family>.py).
  // (the families' table, llm/model_families.h; check() refuses a model without a row)
  bool is_gemma() const { return family_->gemma_style; }     // (1 + w) norms, GELU, scaled embedding
  bool softcapping() const { return family_->softcapping; }  // attention and final logit tanh caps
  bool four_norms() const { return family_->post_norms; }
  bool fused() const { return family_->fused_projections; }  // qkv_proj and gate_up_proj
  bool qk_norm() const { return family_->qk_norm; }
  bool lora() const { return o_.method == FinetuneMethod::kLora || o_.method == FinetuneMethod::kQlora; }
  // Tied embeddings are the head: trained wherever the head is.
  bool trainable_embeddings() const {
    return o_.method == FinetuneMethod::kFull || (m_.tied_embeddings && trainable_head());
  }
  bool trainable_head() const { return o_.method == FinetuneMethod::kFull || o_.method == FinetuneMethod::kFreeze; }
  bool trainable_layer(uint32_t i) const {
    if (o_.method == FinetuneMethod::kFull) return true;
    return o_.method == FinetuneMethod::kFreeze && i + o_.freeze_trainable_layers >= m_.n_layer;
  }
  // peft with reentrant checkpointing calls enable_input_require_grads:
  // the embedding's output requires grad so that checkpointed layers run
  // backward at all.
  bool hook_input_grads() const { return o_.checkpointing && !trainable_embeddings(); }

  void check() const {
    if (family_ == nullptr || !family_->finetune) {
      std::string known;
      for (const llm::ModelFamily& f : llm::model_families())
        if (f.finetune) known += (known.empty() ? "" : ", ") + std::string(f.name);
      throw InputError(fmt::format(
          "{}: architecture '{}' (config.json's model_type, or GGUF's general.architecture) is not one gpumem builds a "
          "fine-tuning step for: {}",
          m_.source, m_.architecture, known));
    }
    if (m_.n_layer == 0 || m_.n_embd == 0 || m_.n_head == 0 || m_.n_vocab == 0)
      throw InputError(m_.source + ": the model's shape is incomplete (layers, hidden size, heads and vocabulary)");
    if (m_.head_dim_v != 0 && m_.head_dim_k != 0 && m_.head_dim_v != m_.head_dim_k)
      throw InputError(m_.source + ": K and V heads of different sizes (multi-head latent attention) cannot be sized");
    if (o_.seq < 2) throw InputError(GPUMEM_FLAG_CONTEXT ": at least 2 tokens (the loss predicts each next one)");
    if (o_.micro_batch == 0) throw InputError(GPUMEM_FLAG_BATCH ": at least 1");
    if (m_.n_ctx_train != 0 && o_.seq > m_.n_ctx_train)
      throw InputError(fmt::format(GPUMEM_FLAG_CONTEXT " {}: past max_position_embeddings {} of {}", o_.seq,
                                   m_.n_ctx_train, m_.source));
    static const std::set<std::string, std::less<>> known = {"q", "k", "v", "o", "gate", "up", "down", "head", "embed"};
    for (const auto& t : o_.lora_targets) {
      if (!known.count(t))
        throw InputError(
            fmt::format(GPUMEM_FLAG_LORA_TARGETS ": '{}' is not one of q, k, v, o, gate, up, down, head, embed", t));
    }
  }

  // --- values and ops -------------------------------------------------

  int value(std::string name, uint64_t bytes, DType dtype, std::vector<int64_t> dims) {
    train::Value v;
    v.name = std::move(name);
    v.bytes = bytes;
    v.dtype = dtype;
    v.dims = std::move(dims);
    out_.graph.values.push_back(std::move(v));
    return static_cast<int>(out_.graph.values.size()) - 1;
  }
  // An activation of the compute type.
  struct Shape {
    std::vector<uint64_t> dims;
    DType dtype;
  };
  Shape act(std::vector<uint64_t> dims, std::optional<DType> dtype = std::nullopt) const {
    return {std::move(dims), dtype.value_or(adt_)};
  }
  int input(std::string name, uint64_t bytes, DType dtype, std::vector<int64_t> dims) {
    const int v = value(std::move(name), bytes, dtype, std::move(dims));
    out_.graph.values[static_cast<size_t>(v)].input = true;
    return v;
  }
  int param(const std::string& name, std::vector<uint64_t> dims, bool trainable, std::optional<DType> dtype = {}) {
    uint64_t n = 1;
    for (auto d : dims) n *= d;
    const DType t = dtype.value_or(wdt_);
    std::vector<int64_t> sdims(dims.begin(), dims.end());
    const int v = value(name, n * bytes_of(t), t, sdims);
    train::Value& p = out_.graph.values[static_cast<size_t>(v)];
    p.parameter = true;
    p.trainable = trainable;
    out_.graph.parameters.push_back(v);
    out_.total_parameters += n;
    (trainable ? out_.trainable_weight_bytes : out_.frozen_weight_bytes) += p.bytes;
    if (trainable) out_.trainable_parameters += n;
    return v;
  }
  // A frozen linear weight as QLoRA stores it.
  int quantized_param(const std::string& name, uint64_t rows, uint64_t cols) {
    const int v = value(name, quantized_bytes(o_.quant, rows, cols), DType::UInt8,
                        {static_cast<int64_t>(rows), static_cast<int64_t>(cols)});
    train::Value& p = out_.graph.values[static_cast<size_t>(v)];
    p.parameter = true;
    out_.graph.parameters.push_back(v);
    out_.total_parameters += rows * cols;
    out_.frozen_weight_bytes += p.bytes;
    return v;
  }
  int op(std::string kind, std::string name, std::vector<int> inputs, int output) {
    out_.graph.ops.push_back(train::Op{std::move(kind), std::move(name), std::move(inputs), {output}, false});
    return output;
  }
  int op(std::string kind, std::string name, std::vector<int> inputs, const Shape& shape) {
    uint64_t n = 1;
    std::vector<int64_t> dims;
    for (auto d : shape.dims) {
      n *= d;
      dims.push_back(static_cast<int64_t>(d));
    }
    const int out = value(name, n * bytes_of(shape.dtype), shape.dtype, std::move(dims));
    return op(std::move(kind), std::move(name), std::move(inputs), out);
  }
  // A view of `of` (transpose, reshape of contiguous memory, slice): no storage.
  int view(const std::string& name, int of, std::vector<uint64_t> dims) {
    const train::Value& src = out_.graph.values[static_cast<size_t>(of)];
    const int base = src.alias_of >= 0 ? src.alias_of : of;
    const DType t = src.dtype;
    const int v = value(name, 0, t, std::vector<int64_t>(dims.begin(), dims.end()));
    out_.graph.values[static_cast<size_t>(v)].alias_of = base;
    return op("Reshape", name, {of}, v);
  }

  // --- pieces ------------------------------------------------------------

  void rotary_tables() {
    // LlamaRotaryEmbedding: inv_freq @ positions in fp32, cat(freqs, freqs),
    // cos and sin, then cast to the compute type. No gradient.
    const uint64_t half = hd_ / 2;
    const int freqs = op("constant", "/model/rotary_emb/freqs", {}, act({b_, s_, half}, DType::Float));
    const int emb = op("Concat", "/model/rotary_emb/cat", {freqs, freqs}, act({b_, s_, hd_}, DType::Float));
    cos_ = op("Cos", "/model/rotary_emb/cos", {emb}, act({b_, s_, hd_}, DType::Float));
    sin_ = op("Sin", "/model/rotary_emb/sin", {emb}, act({b_, s_, hd_}, DType::Float));
    if (adt_ != DType::Float) {
      cos_ = op("Cast", "/model/rotary_emb/cos_to", {cos_}, act({b_, s_, hd_}));
      sin_ = op("Cast", "/model/rotary_emb/sin_to", {sin_}, act({b_, s_, hd_}));
    }
  }

  // LlamaRMSNorm: x.to(fp32), pow(2).mean(-1), + eps, rsqrt, x * r,
  // .to(input dtype), weight * x. Gemma's: the same in fp32 throughout, then
  // x * (1 + weight.float()), then type_as(x).
  // Over the last dimension of `rows` x `width` values: the hidden size,
  // or a head's for the q/k norms of Qwen 3 and Gemma 3.
  int rms_norm(const std::string& path, const std::string& weight_name, int x, bool trainable) {
    return rms_norm(path, weight_name, x, trainable, b_ * s_, m_.n_embd);
  }
  int rms_norm(const std::string& path, const std::string& weight_name, int x, bool trainable, uint64_t rows,
               uint64_t width) {
    const DType f32 = DType::Float;
    const int w = param(weight_name, {width}, trainable);
    int x32 = x;
    if (adt_ != f32) x32 = op("Cast", path + "/to_float", {x}, act({rows, width}, f32));
    const int sq = op("Pow", path + "/pow", {x32, -1}, act({rows, width}, f32));
    const bool old_mean = o_.train.torch && o_.train.torch->before(2, 0);
    const int mean = op(old_mean ? "mean_keeping_input" : "ReduceMean", path + "/mean", {sq}, act({rows, 1}, f32));
    const int eps = op("Add", path + "/add_eps", {mean, -1}, act({rows, 1}, f32));
    const int r = op("rsqrt", path + "/rsqrt", {eps}, act({rows, 1}, f32));
    int y = op("Mul", path + "/mul", {x32, r}, act({rows, width}, f32));
    if (is_gemma()) {
      const int w1 = op("Add", path + "/one_plus_weight", {w, -1}, act({width}, f32));
      y = op("Mul", path + "/mul_weight", {y, w1}, act({rows, width}, f32));
      if (adt_ != f32) y = op("Cast", path + "/type_as", {y}, act({rows, width}));
      return y;
    }
    if (adt_ != f32) y = op("Cast", path + "/to_input_dtype", {y}, act({rows, width}));
    return op("Mul", path + "/mul_weight", {w, y}, act({rows, width}));
  }

  // Phi-3's fused projections carry an adapter when any of their parts is
  // a target (peft's qkv_proj, gate_up_proj).
  bool targeted(const std::string& short_name) const {
    const auto listed = [&](const char* name) {
      return std::find(o_.lora_targets.begin(), o_.lora_targets.end(), name) != o_.lora_targets.end();
    };
    if (!lora()) return false;
    if (short_name == "qkv") return listed("q") || listed("k") || listed("v");
    if (short_name == "gate_up") return listed("gate") || listed("up");
    return listed(short_name.c_str());
  }

  // nn.Linear (bias where the family has one), with peft's LoRA adapter
  // when targeted: base(x) + lora_B(lora_A(dropout(x))) * scaling, and for
  // QLoRA a 4-bit base.
  int linear(const std::string& module, const std::string& path, const std::string& short_name, int x, uint64_t rows_in,
             uint64_t in, uint64_t out, bool layer_trainable, bool bias = false) {
    const bool adapted = targeted(short_name);
    int y;
    if (o_.method == FinetuneMethod::kQlora) {
      // load_in_4bit quantizes every linear layer of the blocks, adapted or
      // not (the head and embeddings stay as they are); biases stay 16-bit.
      const int w = quantized_param(module + ".weight", out, in);
      y = op("linear4bit", path + "/linear4bit", {x, w}, act({rows_in, out}));
      if (bias) param(module + ".bias", {out}, false);
    } else {
      const int w = param(module + ".weight", {out, in}, layer_trainable && !adapted);
      std::vector<int> inputs = {x, w};
      if (bias) inputs.push_back(param(module + ".bias", {out}, layer_trainable && !adapted));
      y = op("linear", path + "/linear", inputs, act({rows_in, out}));
    }
    if (!adapted) return y;
    return adapter(module, path, x, y, rows_in, in, out);
  }

  // peft's LoRA beside a linear layer whose output is y:
  // y + lora_B(lora_A(dropout(x))) * scaling. peft keeps the adapters in fp32
  // (autocast_adapter_dtype): a bf16 input is cast up for them, the sum comes
  // out fp32 and is cast back.
  int adapter(const std::string& module, const std::string& path, int x, int y, uint64_t rows_in, uint64_t in,
              uint64_t out) {
    const uint64_t r = o_.lora_r;
    const DType f32 = DType::Float;
    int xd = x;
    if (adt_ != f32) xd = op("Cast", path + "/lora_input_to_float", {x}, act({rows_in, in}, f32));
    if (o_.lora_dropout > 0) xd = op("Dropout", path + "/lora_dropout", {xd}, act({rows_in, in}, f32));
    const int a = param(module + ".lora_A.default.weight", {r, in}, true, f32);
    const int bw = param(module + ".lora_B.default.weight", {out, r}, true, f32);
    const int ha = op("linear", path + "/lora_A", {xd, a}, act({rows_in, r}, f32));
    const int hb = op("linear", path + "/lora_B", {ha, bw}, act({rows_in, out}, f32));
    const int scaled = op("Mul", path + "/lora_scaling", {hb, -1}, act({rows_in, out}, f32));
    const int sum = op("Add", path + "/lora_add", {y, scaled}, act({rows_in, out}, f32));
    return adt_ == f32 ? sum : op("Cast", path + "/lora_result_to", {sum}, act({rows_in, out}));
  }

  // peft's LoRA Embedding: F.embedding(ids, lora_embedding_A.T) @ lora_embedding_B.T
  // * scaling added to the embedding's output (no dropout: peft applies none here).
  int embedding_adapter(int ids, int h) {
    const uint64_t r = o_.lora_r, V = m_.n_vocab, E = m_.n_embd;
    const DType f32 = DType::Float;
    const std::string path = "/model/embed_tokens";
    const int a = param("model.embed_tokens.lora_embedding_A.default", {r, V}, true, f32);
    const int bw = param("model.embed_tokens.lora_embedding_B.default", {E, r}, true, f32);
    const int ha = op("Gather", path + "/lora_embedding_A", {a, ids}, act({b_, s_, r}, f32));
    const int hb = op("linear", path + "/lora_embedding_B", {ha, bw}, act({b_ * s_, E}, f32));
    const int scaled = op("Mul", path + "/lora_scaling", {hb, -1}, act({b_ * s_, E}, f32));
    const int sum = op("Add", path + "/lora_add", {h, scaled}, act({b_, s_, E}, f32));
    return adt_ == f32 ? sum : op("Cast", path + "/lora_result_to", {sum}, act({b_, s_, E}));
  }

  // rotate_half and q * cos + rotate_half(q) * sin on [b, heads, s, d].
  int rope(const std::string& path, int q, uint64_t heads) {
    const Shape full = act({b_, heads, s_, hd_});
    const int x2 = view(path + "/x2", q, {b_, heads, s_, hd_ / 2});
    const int x1 = view(path + "/x1", q, {b_, heads, s_, hd_ / 2});
    const int neg = op("Neg", path + "/neg", {x2}, act({b_, heads, s_, hd_ / 2}));
    const int rot = op("Concat", path + "/rotate_half", {neg, x1}, full);
    const int qc = op("Mul", path + "/mul_cos", {q, cos_}, full);
    const int rs = op("Mul", path + "/mul_sin", {rot, sin_}, full);
    return op("Add", path + "/add", {qc, rs}, full);
  }

  int softcap(const std::string& path, int x, std::vector<uint64_t> dims) {
    const int d = op("Div", path + "/div", {x, -1}, act(dims));
    const int t = op("Tanh", path + "/tanh", {d}, act(dims));
    return op("Mul", path + "/mul", {t, -1}, act(dims));
  }

  // Whether grouped keys and values are copied out to every head first.
  // Eager attention always does (repeat_kv). Under SDPA, transformers hands
  // the grouped tensors to the kernel (enable_gqa=True) from torch 2.5 when
  // there is no mask to apply (a causal batch without padding, as fine-tuning
  // batches are when the collator pads nothing: transformers drops an
  // all-ones mask): sdpa_attention.py's use_gqa_in_sdpa. A sliding window
  // shorter than the sequence is a mask, so those layers copy. Measured on
  // the torch 2.10 and 2.15 recordings (tests/data/torch2): the copies were
  // +2.35% on Llama's step, and Gemma 3's windowed layers make them.
  bool repeats_kv(bool masked) const {
    if (o_.attention == Attention::kEager || masked) return true;
    return o_.train.torch && o_.train.torch->before(2, 5);
  }

  // `masked`: the layer's sliding window is shorter than the sequence, so
  // SDPA gets an explicit mask.
  int attention(const std::string& lp, const std::string& mp, int xn, bool trainable, bool masked) {
    const uint64_t E = m_.n_embd, H = m_.n_head, K = std::max<uint32_t>(1, m_.n_head_kv);
    const bool bias = family_->qkv_bias;
    const std::string ap = lp + "/self_attn", am = mp + ".self_attn";
    int q, k, v;
    if (fused()) {
      // Phi-3's qkv_proj: one matmul, q, k and v slices of its output.
      const int qkv = linear(am + ".qkv_proj", ap + "/qkv_proj", "qkv", xn, tokens_, E, (H + 2 * K) * hd_, trainable);
      q = view(ap + "/q_slice", qkv, {tokens_, H * hd_});
      k = view(ap + "/k_slice", qkv, {tokens_, K * hd_});
      v = view(ap + "/v_slice", qkv, {tokens_, K * hd_});
    } else {
      q = linear(am + ".q_proj", ap + "/q_proj", "q", xn, tokens_, E, H * hd_, trainable, bias);
      k = linear(am + ".k_proj", ap + "/k_proj", "k", xn, tokens_, E, K * hd_, trainable, bias);
      v = linear(am + ".v_proj", ap + "/v_proj", "v", xn, tokens_, E, K * hd_, trainable, bias);
    }
    int qh = q, kh = k;
    if (qk_norm()) {
      qh = rms_norm(ap + "/q_norm", am + ".q_norm.weight", q, trainable, tokens_ * H, hd_);
      kh = rms_norm(ap + "/k_norm", am + ".k_norm.weight", k, trainable, tokens_ * K, hd_);
    }
    const int qt = view(ap + "/q_heads", qh, {b_, H, s_, hd_});
    const int kt = view(ap + "/k_heads", kh, {b_, K, s_, hd_});
    int vt = view(ap + "/v_heads", v, {b_, K, s_, hd_});
    const int qr = rope(ap + "/rope_q", qt, H);
    int kr = rope(ap + "/rope_k", kt, K);
    if (fused() && !o_.checkpointing) {
      // transformers builds a DynamicCache whenever use_cache is on (its
      // default; gradient checkpointing turns it off), and cache.update
      // concatenates the new keys and values into it: attention reads the
      // copies. For separate projections the copy only replaces a tensor of
      // the same size; for Phi-3's fused qkv_proj, v no longer keeps the
      // whole qkv output alive (the torch 2.x recordings: phi3).
      vt = op("clone", ap + "/cache_update_v", {vt}, act({b_, K, s_, hd_}));
    }
    if (K != H && repeats_kv(masked)) {
      // repeat_kv: expand, then reshape copies.
      kr = op("clone", ap + "/repeat_kv_k", {kr}, act({b_, H, s_, hd_}));
      vt = op("clone", ap + "/repeat_kv_v", {vt}, act({b_, H, s_, hd_}));
    }
    int ctx;
    if (o_.attention == Attention::kEager) {
      const std::vector<uint64_t> sd = {b_, H, s_, s_};
      int scores = op("MatMul", ap + "/qk", {qr, kr}, act(sd));
      scores = op("Mul", ap + "/scale", {scores, -1}, act(sd));
      if (softcapping()) scores = softcap(ap + "/attn_logit_softcapping", scores, sd);
      scores = op("Add", ap + "/mask", {scores, mask_}, act(sd));
      int probs = op("Softmax", ap + "/softmax", {scores}, act(sd, DType::Float));
      if (adt_ != DType::Float) probs = op("Cast", ap + "/softmax_to", {probs}, act(sd));
      if (m_.attention_dropout > 0) probs = op("Dropout", ap + "/attention_dropout", {probs}, act(sd));
      ctx = op("MatMul", ap + "/pv", {probs, vt}, act({b_, H, s_, hd_}));
    } else {
      ctx = op("sdpa", ap + "/sdpa", {qr, kr, vt}, act({b_, H, s_, hd_}));
    }
    // attn_output.transpose(1, 2).contiguous(): a copy after eager attention,
    // whose matmul writes [b, heads, s, hd]. SDPA's kernels write their output
    // in the query's layout: the rotary embedding's elementwise ops keep the
    // projection's [b, s, heads, hd] layout, so the transpose is contiguous
    // again and nothing is copied; Phi-3's rotary concatenates the rotated and
    // the passed-through parts (torch.cat: [b, heads, s, hd]), so it copies
    // (the torch 2.x recordings, llama against phi3).
    const int merged = o_.attention == Attention::kEager || fused()
                           ? op("clone", ap + "/transpose_contiguous", {ctx}, act({b_, s_, H * hd_}))
                           : view(ap + "/transpose_contiguous", ctx, {b_, s_, H * hd_});
    return linear(am + ".o_proj", ap + "/o_proj", "o", merged, tokens_, H * hd_, E, trainable);
  }

  int mlp(const std::string& path, const std::string& module, int x, uint64_t rows, bool trainable) {
    const uint64_t E = m_.n_embd, F = m_.n_ff;
    int gate = -1;
    int up = -1;
    if (fused()) {
      // Phi-3's gate_up_proj: one matmul, chunked into gate and up views.
      const int both =
          linear(module + ".gate_up_proj", path + "/gate_up_proj", "gate_up", x, rows, E, 2 * F, trainable);
      gate = view(path + "/gate_chunk", both, {rows, F});
      up = view(path + "/up_chunk", both, {rows, F});
    } else {
      gate = linear(module + ".gate_proj", path + "/gate_proj", "gate", x, rows, E, F, trainable);
    }
    const int a = op(is_gemma() ? "gelu" : "silu", path + "/act", {gate}, act({rows, F}));
    if (!fused()) up = linear(module + ".up_proj", path + "/up_proj", "up", x, rows, E, F, trainable);
    const int prod = op("Mul", path + "/mul", {a, up}, act({rows, F}));
    return linear(module + ".down_proj", path + "/down_proj", "down", prod, rows, F, E, trainable);
  }

  // Mixtral's sparse block: router, fp32 softmax, top-k, renormalised
  // weights, then each expert on the tokens routed to it (the same number
  // for each: tokens x k / experts), scaled and added back in place.
  int moe(const std::string& lp, const std::string& mp, int x, bool trainable) {
    const uint64_t E = m_.n_embd, X = m_.n_expert, k = std::max<uint32_t>(1, m_.n_expert_used);
    const std::string p = lp + "/block_sparse_moe", mod = mp + ".block_sparse_moe";
    const int router = param(mod + ".gate.weight", {X, E}, trainable);
    const int logits = op("linear", p + "/gate/linear", {x, router}, act({tokens_, X}));
    const int probs = op("Softmax", p + "/softmax", {logits}, act({tokens_, X}, DType::Float));
    const int top = op("topk", p + "/topk", {probs}, act({tokens_, k}, DType::Float));
    const int sum = op("ReduceSum", p + "/sum", {top}, act({tokens_, 1}, DType::Float));
    int w = op("Div", p + "/renormalize", {top, sum}, act({tokens_, k}, DType::Float));
    if (adt_ != DType::Float) w = op("Cast", p + "/weights_to", {w}, act({tokens_, k}));
    int out = op("constant", p + "/zeros", {}, act({tokens_, E}));
    op("constant", p + "/expert_mask", {}, act({tokens_, k, X}, DType::Int64));
    const uint64_t routed = std::max<uint64_t>(1, div_up(tokens_ * k, X));
    for (uint64_t e = 0; e < X; ++e) {
      const std::string ep = fmt::format("{}/experts.{}", p, e), em = fmt::format("{}.experts.{}", mod, e);
      const int idx = op("constant", ep + "/where", {}, act({routed}, DType::Int64));
      const int cur = op("Gather", ep + "/index", {x, idx}, act({routed, E}));
      const int y = expert(ep, em, cur, routed, trainable);
      const int wi = op("Gather", ep + "/routing_weight", {w, idx}, act({routed, 1}));
      const int scaled = op("Mul", ep + "/scale", {y, wi}, act({routed, E}));
      out = op("index_add", ep + "/index_add", {out, idx, scaled}, act({tokens_, E}));
    }
    return out;
  }
  // An expert's MLP: w2(act(w1(x)) * w3(x)).
  int expert(const std::string& path, const std::string& module, int x, uint64_t rows, bool trainable) {
    const uint64_t E = m_.n_embd, F = m_.n_ff;
    const int g1 = linear(module + ".w1", path + "/w1", "gate", x, rows, E, F, trainable);
    const int a = op("silu", path + "/act", {g1}, act({rows, F}));
    const int g3 = linear(module + ".w3", path + "/w3", "up", x, rows, E, F, trainable);
    const int prod = op("Mul", path + "/mul", {a, g3}, act({rows, F}));
    return linear(module + ".w2", path + "/w2", "down", prod, rows, F, E, trainable);
  }

  int layer(uint32_t i, int h) {
    const std::string lp = fmt::format("/model/layers.{}", i), mp = fmt::format("model.layers.{}", i);
    out_.layer_modules.push_back(mp);
    const bool t = trainable_layer(i);
    int xn = rms_norm(lp + "/input_layernorm", mp + ".input_layernorm.weight", h, t);
    int a = attention(lp, mp, xn, t, m_.layer_is_windowed(i) && m_.sliding_window < s_);
    const bool four = four_norms();
    if (four) a = rms_norm(lp + "/post_attention_layernorm", mp + ".post_attention_layernorm.weight", a, t);
    h = op("Add", lp + "/residual_attn", {h, a}, act({b_, s_, m_.n_embd}));
    xn = rms_norm(lp + (four ? "/pre_feedforward_layernorm" : "/post_attention_layernorm"),
                  mp + (four ? ".pre_feedforward_layernorm.weight" : ".post_attention_layernorm.weight"), h, t);
    int f = m_.n_expert > 1 ? moe(lp, mp, xn, t) : mlp(lp + "/mlp", mp + ".mlp", xn, tokens_, t);
    if (four) f = rms_norm(lp + "/post_feedforward_layernorm", mp + ".post_feedforward_layernorm.weight", f, t);
    return op("Add", lp + "/residual_mlp", {h, f}, act({b_, s_, m_.n_embd}));
  }

  // requires_grad from the trainable parameters forward, as autograd does.
  void propagate() {
    auto& values = out_.graph.values;
    for (auto& v : values) v.requires_grad = v.parameter && v.trainable;
    for (train::Op& op : out_.graph.ops) {
      op.needs_backward = std::any_of(op.inputs.begin(), op.inputs.end(),
                                      [&](int id) { return id >= 0 && values[static_cast<size_t>(id)].requires_grad; });
      if (kNoGradient.count(op.kind)) op.needs_backward = false;
      for (int o : op.outputs) {
        train::Value& v = values[static_cast<size_t>(o)];
        v.requires_grad = op.needs_backward && is_floating(v.dtype);
        if (o == hooked_) v.requires_grad = true;
      }
    }
  }
};

}  // namespace

DecoderStep decoder_step(const llm::LlmModel& model, const FinetuneOptions& options) {
  return Builder(model, options).build();
}

}  // namespace gpumem::finetune
