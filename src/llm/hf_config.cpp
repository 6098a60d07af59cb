// A Hugging Face config.json as an LlmModel, and the tensors of a
// Llama-style decoder derived from its shape. Key names as transformers'
// LlamaConfig / MistralConfig / Qwen2Config define them.
#include <cstdint>

#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "gpumem/common/error.h"
#include "gpumem/llm/model_families.h"
#include "llm/model_sources.h"
#include "llm/sliding_windows.h"

namespace gpumem::llm {
namespace {

using nlohmann::json;

class Config {
 public:
  Config(const std::string& text, std::string path) : path_(std::move(path)) {
    try {
      root_ = parse_bounded_json(text, path_);
    } catch (const json::parse_error& e) {
      throw InputError(fmt::format("{}: byte {}: not JSON", printable(path_), e.byte));
    } catch (const json::exception& e) {  // a number past a double (out_of_range.406), ...
      throw InputError(fmt::format("{}: not JSON gpumem can read ({})", printable(path_), e.what()));
    }
    if (!root_.is_object()) throw InputError(fmt::format("{}: not a JSON object", printable(path_)));
    // Multimodal models (Llama 4, Gemma 3, ...) keep the decoder's keys in text_config.
    if (root_.contains("text_config") && root_["text_config"].is_object()) text_ = &root_["text_config"];
  }

  const json* find(const std::string& key) const {
    if (text_ != nullptr && text_->contains(key) && !(*text_)[key].is_null()) return &(*text_)[key];
    if (root_.contains(key) && !root_[key].is_null()) return &root_[key];
    return nullptr;
  }
  std::optional<uint64_t> number(const std::string& key) const {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number_unsigned() || v->get<uint64_t>() > UINT32_MAX)
      throw InputError(fmt::format("{}: key {}: {} is not a whole number below 2^32", printable(path_), key,
                                   printable(json_text(*v))));
    return v->get<uint64_t>();
  }
  uint64_t required(const std::string& key) const {
    const auto v = number(key);
    if (!v || *v == 0) throw InputError(fmt::format("{}: key {} is missing or zero", printable(path_), key));
    return *v;
  }
  std::string text(const std::string& key, const std::string& otherwise) const {
    const json* v = find(key);
    return v != nullptr && v->is_string() ? v->get<std::string>() : otherwise;
  }
  std::optional<bool> flag(const std::string& key) const {
    const json* v = find(key);
    if (v == nullptr || !v->is_boolean()) return std::nullopt;
    return v->get<bool>();
  }
  // A probability; InputError outside [0, 1].
  double probability(const std::string& key) const {
    const json* v = find(key);
    if (v == nullptr) return 0;
    if (!v->is_number() || !(v->get<double>() >= 0 && v->get<double>() <= 1))
      throw InputError(
          fmt::format("{}: key {}: {} is not a probability", printable(path_), key, printable(json_text(*v))));
    return v->get<double>();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  json root_;
  const json* text_ = nullptr;
};

std::string dtype_of_torch(const std::string& torch_dtype, const std::string& path) {
  if (torch_dtype == "bfloat16") return "BF16";
  if (torch_dtype == "float16" || torch_dtype == "half") return "F16";
  if (torch_dtype == "float32" || torch_dtype == "float") return "F32";
  throw InputError(fmt::format("{}: key torch_dtype: '{}' is not bfloat16, float16 or float32", printable(path),
                               printable(torch_dtype)));
}

// Which layers slide, as llama.cpp runs the model (llm/sliding_windows.h):
// the config gives the window, newer configs list "layer_types", Gemma 3
// gives "sliding_window_pattern"; Qwen2's use_sliding_window: false turns
// the window off.
void read_sliding_window(const Config& c, LlmModel& m) {
  const auto window = c.number("sliding_window");
  if (!window || *window == 0 || c.flag("use_sliding_window") == false) return;
  m.sliding_window = *window;
  std::vector<bool> listed;
  const json* types = c.find("layer_types");
  if (types != nullptr && types->is_array()) {
    if (types->size() != m.n_layer)
      throw InputError(fmt::format("{}: key layer_types has {} entries for {} layers", printable(c.path()),
                                   types->size(), m.n_layer));
    for (const auto& t : *types) listed.push_back(t.is_string() && t.get<std::string>() == "sliding_attention");
  }
  apply_window_rules(m, types != nullptr && types->is_array() ? &listed : nullptr, c.number("sliding_window_pattern"));
}

// The decoder families gpumem models, for messages: "llama, mistral, ...".
std::string modelled_families() {
  std::string names;
  for (const auto& f : model_families()) names += (names.empty() ? "" : ", ") + std::string(f.name);
  return names;
}

// Issue 47: a T5, BLOOM or Falcon config got "key num_hidden_layers is
// missing or zero". A model gpumem does not model is named as such, in one
// line: an encoder-decoder by its config's own flag, any other family that
// names its layers differently by its model_type.
void refuse_unmodelled(const Config& c, const std::string& model_type) {
  if (c.flag("is_encoder_decoder").value_or(false)) {
    throw InputError(
        fmt::format("{}: model_type '{}' is an encoder-decoder, which is not modelled yet: gpumem reads decoder-only "
                    "families ({})",
                    printable(c.path()), printable(model_type), modelled_families()));
  }
  // Decoders whose blocks are not Llama-shaped (a two-matrix MLP, parallel
  // attention, learned positions or ALiBi): priced as Llama they would be
  // wrong by their MLP alone, so they are refused by name.
  static constexpr std::pair<std::string_view, std::string_view> kNotLlamaShaped[] = {
      {"falcon", "parallel attention and a two-matrix MLP"},
      {"RefinedWeb", "parallel attention and a two-matrix MLP"},
      {"RefinedWebModel", "parallel attention and a two-matrix MLP"},
      {"gpt_neox", "parallel residuals, partial rotary and a two-matrix MLP"},
      {"gpt2", "learned positions and a two-matrix MLP"},
      {"gptj", "parallel attention and a two-matrix MLP"},
      {"bloom", "ALiBi and a two-matrix MLP"},
      {"opt", "learned positions and a two-matrix MLP"},
      {"mpt", "ALiBi and a two-matrix MLP"},
      {"phi", "parallel attention and a two-matrix MLP (Phi-1 and Phi-2)"},
  };
  for (const auto& [name, why] : kNotLlamaShaped) {
    if (model_type == name) {
      throw InputError(
          fmt::format("{}: model_type '{}' ({}) is not modelled yet: gpumem reads Llama-shaped decoder "
                      "families ({})",
                      printable(c.path()), printable(model_type), why, modelled_families()));
    }
  }
  if (model_family(model_type) == nullptr && c.find("num_hidden_layers") == nullptr) {
    throw InputError(fmt::format("{}: model_type '{}' is not a family gpumem models yet (it reads {})",
                                 printable(c.path()), printable(model_type), modelled_families()));
  }
}

}  // namespace

LlmModel model_from_hf_config(const std::string& text, const std::string& path) {
  const Config c(text, path);
  LlmModel m;
  m.source = path;
  m.format = "config";
  const std::string model_type = c.text("model_type", "llama");
  // DeepSeek V2/V3 cache one compressed latent per token, not K and V per
  // head: the formulas here would be wrong, so say so.
  if (c.find("kv_lora_rank") != nullptr)
    throw InputError(
        fmt::format("{}: key kv_lora_rank: multi-head latent attention (DeepSeek V2/V3) is not "
                    "modelled by gpumem llm yet",
                    printable(path)));
  m.architecture = model_type;
  refuse_unmodelled(c, model_type);
  m.n_layer = static_cast<uint32_t>(c.required("num_hidden_layers"));
  m.n_embd = c.required("hidden_size");
  m.n_head = static_cast<uint32_t>(c.required("num_attention_heads"));
  m.n_head_kv = static_cast<uint32_t>(c.number("num_key_value_heads").value_or(m.n_head));
  m.n_ff = c.required("intermediate_size");
  m.n_vocab = c.required("vocab_size");
  m.n_ctx_train = c.number("max_position_embeddings").value_or(0);
  m.head_dim_k = m.head_dim_v = c.number("head_dim").value_or(m.n_embd / m.n_head);
  // Mixtral says num_local_experts, Qwen MoE num_experts with the experts'
  // own width in moe_intermediate_size.
  m.n_expert = static_cast<uint32_t>(c.number("num_local_experts").value_or(c.number("num_experts").value_or(0)));
  if (m.n_expert > 0) m.n_ff = c.number("moe_intermediate_size").value_or(m.n_ff);
  m.n_expert_used = static_cast<uint32_t>(c.number("num_experts_per_tok").value_or(0));
  check_shape(m, path);
  read_sliding_window(c, m);
  check_shape(m, path);
  // What the family's transformers classes do where the config is silent
  // (model_families.cpp): PretrainedConfig ties by default, the Llama,
  // Mistral and Qwen families do not.
  const ModelFamily* family = model_family(model_type);
  m.tied_embeddings = c.flag("tie_word_embeddings").value_or(family == nullptr || !family->untied);
  m.attention_dropout = c.probability("attention_dropout");
  const std::string dtype = dtype_of_torch(c.text("torch_dtype", c.text("dtype", "bfloat16")), path);
  DecoderExtras extras;
  extras.qkv_bias = (family != nullptr && family->qkv_bias) || c.flag("attention_bias").value_or(false);
  extras.qk_norm = family != nullptr && family->qk_norm;
  extras.post_norms = family != nullptr && family->post_norms;
  m.tensors = decoder_tensors(m, dtype, dtype, extras);
  m.weight_dtype = dtype;
  return m;
}

std::vector<LlmTensor> decoder_tensors(const LlmModel& s, const std::string& matrix_dtype,
                                       const std::string& vector_dtype, const DecoderExtras& extras) {
  std::vector<LlmTensor> out;
  auto add = [&](std::string name, std::vector<uint64_t> ne, int layer) {
    const bool matrix = ne.size() >= 2;
    std::string dtype = matrix ? matrix_dtype : vector_dtype;
    uint64_t rows = 1;
    for (size_t i = 1; i < ne.size(); ++i) rows *= ne[i];
    auto bytes = dtype_bytes(dtype, ne[0], rows);
    if (!bytes) {
      dtype = "F16";
      bytes = dtype_bytes(dtype, ne[0], rows);
    }
    out.push_back({std::move(name), std::move(ne), dtype, *bytes, layer});
  };
  const uint64_t q = uint64_t{s.n_head} * s.head_dim_k, k = uint64_t{s.n_head_kv} * s.head_dim_k;
  const uint64_t v = uint64_t{s.n_head_kv} * s.head_dim_v, o = uint64_t{s.n_head} * s.head_dim_v;
  add("token_embd.weight", {s.n_embd, s.n_vocab}, -1);
  for (uint32_t i = 0; i < s.n_layer; ++i) {
    const std::string b = fmt::format("blk.{}.", i);
    const int l = static_cast<int>(i);
    add(b + "attn_norm.weight", {s.n_embd}, l);
    add(b + "attn_q.weight", {s.n_embd, q}, l);
    add(b + "attn_k.weight", {s.n_embd, k}, l);
    add(b + "attn_v.weight", {s.n_embd, v}, l);
    if (extras.qkv_bias) {
      add(b + "attn_q.bias", {q}, l);
      add(b + "attn_k.bias", {k}, l);
      add(b + "attn_v.bias", {v}, l);
    }
    if (extras.qk_norm) {
      add(b + "attn_q_norm.weight", {s.head_dim_k}, l);
      add(b + "attn_k_norm.weight", {s.head_dim_k}, l);
    }
    add(b + "attn_output.weight", {o, s.n_embd}, l);
    if (extras.post_norms) add(b + "post_attention_norm.weight", {s.n_embd}, l);
    add(b + "ffn_norm.weight", {s.n_embd}, l);
    if (s.n_expert > 0) {
      add(b + "ffn_gate_inp.weight", {s.n_embd, s.n_expert}, l);
      add(b + "ffn_gate_exps.weight", {s.n_embd, s.n_ff, s.n_expert}, l);
      add(b + "ffn_up_exps.weight", {s.n_embd, s.n_ff, s.n_expert}, l);
      add(b + "ffn_down_exps.weight", {s.n_ff, s.n_embd, s.n_expert}, l);
    } else {
      add(b + "ffn_gate.weight", {s.n_embd, s.n_ff}, l);
      add(b + "ffn_up.weight", {s.n_embd, s.n_ff}, l);
      add(b + "ffn_down.weight", {s.n_ff, s.n_embd}, l);
    }
    if (extras.post_norms) add(b + "post_ffw_norm.weight", {s.n_embd}, l);
  }
  add("output_norm.weight", {s.n_embd}, -1);
  if (!s.tied_embeddings) add("output.weight", {s.n_embd, s.n_vocab}, -1);
  return out;
}

}  // namespace gpumem::llm
