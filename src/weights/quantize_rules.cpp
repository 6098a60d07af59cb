// Which ggml type each tensor gets, as llama.cpp's llama-quantize decides
// it (src/llama-quant.cpp: tensor_allows_quantization,
// llama_tensor_get_type_impl, tensor_type_fallback, read at commit
// 007dbbf3, whose llama_tensor_get_type_impl is the same as that of the
// llama.cpp npm's @node-llama-cpp 3.21.1 ships, the libllama
// tools/llama_quantize_check.py compares with), for the file types gpumem
// has the codecs of. Rewritten from the rules, not the code;
// docs/quantize.md has them as a table.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <numeric>
#include <regex>
#include <string>
#include "gpumem/common/flag_names.h"

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/weights/gguf.h"
#include "gpumem/weights/quantize_file.h"

namespace gpumem::weights {
namespace {

// ggml type ids (enum ggml_type).
constexpr uint32_t kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14,
                   kBF16 = 30;

// llama.cpp's LLAMA_FTYPE_* numbering (include/llama.h).
constexpr uint32_t kFtypeAllF32 = 0, kFtypeF16 = 1, kFtypeQ4_0 = 2, kFtypeQ8_0 = 7, kFtypeQ5_0 = 8, kFtypeQ5_1 = 9,
                   kFtypeQ4_K_S = 14, kFtypeQ4_K_M = 15, kFtypeQ5_K_S = 16, kFtypeQ5_K_M = 17, kFtypeQ6_K = 18,
                   kFtypeBF16 = 32;

enum class Category {
  kTokenEmbd,
  kAttnQ,
  kAttnV,
  kAttnK,
  kAttnQkv,
  kAttnKvB,
  kAttnOutput,
  kFfnUp,
  kFfnGate,
  kFfnDown,
  kOutput,
  kOther
};

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }
// llama.cpp's tensor_get_category on GGUF names; the Hugging Face names of
// the same tensors (Llama-style checkpoints in safetensors) count too.
Category category_of(const std::string& name) {
  if (name == "output.weight" || name == "lm_head.weight") return Category::kOutput;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight" || name.ends_with("embed_tokens.weight"))
    return Category::kTokenEmbd;
  if (contains(name, "attn_qkv.weight") || contains(name, "qkv_proj.weight")) return Category::kAttnQkv;
  if (contains(name, "attn_kv_b.weight")) return Category::kAttnKvB;
  if (contains(name, "attn_v.weight") || contains(name, "v_proj.weight")) return Category::kAttnV;
  if (contains(name, "attn_k.weight") || contains(name, "k_proj.weight")) return Category::kAttnK;
  if (contains(name, "attn_q.weight") || contains(name, "q_proj.weight")) return Category::kAttnQ;
  if (contains(name, "attn_output.weight") || contains(name, "o_proj.weight")) return Category::kAttnOutput;
  if (contains(name, "ffn_up") || contains(name, "up_proj")) return Category::kFfnUp;
  if (contains(name, "ffn_gate") || contains(name, "gate_proj")) return Category::kFfnGate;
  if (contains(name, "ffn_down") || contains(name, "down_proj")) return Category::kFfnDown;
  return Category::kOther;
}

bool is_attn_v(Category c) { return c == Category::kAttnV || c == Category::kAttnQkv || c == Category::kAttnKvB; }

// The layer a name belongs to, as llama.cpp's weight_name_comparer reads it
// ("blk.12." -> 12), or Hugging Face's ("model.layers.12." -> 12); -1 for
// none.
int layer_index(const std::string& name) {
  int layer = -1;
  if (std::sscanf(name.c_str(), "blk.%d.", &layer) == 1) return layer;
  static const std::regex hf(R"((^|\.)layers\.(\d+)\.)");
  std::smatch m;
  if (std::regex_search(name, m, hf) && m[2].length() < 9) return std::stoi(m[2]);
  return -1;
}

// ggml_n_dims: dimensions up to the last one above 1.
int n_dims(const std::vector<uint64_t>& ne) {
  int n = 1;
  for (size_t i = 0; i < ne.size(); ++i)
    if (ne[i] > 1) n = static_cast<int>(i) + 1;
  return n;
}

// tensor_allows_quantization; "" when it may be quantized, else why not.
std::string not_quantized_because(const TensorShape& t, const ModelHints& hints) {
  if (n_dims(t.ne) < 2) return "1-D";
  const std::string& name = t.name;
  if (!hints.onnx && !name.ends_with("weight")) return "name does not end in 'weight'";
  static const std::vector<std::string_view> parts = {"_norm.weight",
                                                      "ffn_gate_inp.weight",
                                                      "ffn_gate_tid2eid.weight",
                                                      "altup",
                                                      "laurel",
                                                      "per_layer_model_proj",
                                                      "ssm_conv1d",
                                                      "shortconv.conv.weight",
                                                      "indexer.k_proj.weight",
                                                      "indexer.q_proj.weight",
                                                      "time_mix_first.weight",
                                                      "time_mix_w0.weight",
                                                      "time_mix_w1.weight",
                                                      "time_mix_w2.weight",
                                                      "time_mix_v0.weight",
                                                      "time_mix_v1.weight",
                                                      "time_mix_v2.weight",
                                                      "time_mix_a0.weight",
                                                      "time_mix_a1.weight",
                                                      "time_mix_a2.weight",
                                                      "time_mix_g1.weight",
                                                      "time_mix_g2.weight",
                                                      "time_mix_decay_w1.weight",
                                                      "time_mix_decay_w2.weight",
                                                      "time_mix_lerp_fused.weight",
                                                      "attn_rel_b.weight",
                                                      ".position_embd",
                                                      "sam.pos_embd",
                                                      "sam.neck.",
                                                      "sam.net_",
                                                      ".rel_pos",
                                                      ".patch_embd",
                                                      ".patch_merger",
                                                      "a.rvq.codebook",
                                                      "mm.a.code_embd"};
  for (const auto part : parts)
    if (contains(name, part)) return fmt::format("llama.cpp keeps '{}' tensors", part);
  if (name == "position_embd.weight" || name == "token_types.weight")
    return "llama.cpp keeps position and token-type embeddings";
  return "";
}

uint32_t block_of(uint32_t type) { return ggml_type(type)->block_size; }
std::string type_name(uint32_t type) { return std::string(ggml_type(type)->name); }

bool use_more_bits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

struct State {
  int n_attention_wv = 0, i_attention_wv = 0;
  int n_ffn_down = 0, i_ffn_down = 0;
  bool tied_embeddings = true;  // until output.weight is seen
};

// llama_tensor_get_type_impl for the file types of quantize_recipes().
uint32_t mixture_type(State& qs, const TensorShape& t, Category category, const QuantizeRecipe& recipe,
                      const ModelHints& hints, std::string& why) {
  uint32_t new_type = recipe.default_type;
  const uint32_t ftype = recipe.file_type;
  const bool falcon = hints.architecture == "falcon";
  if (category == Category::kOutput || (qs.tied_embeddings && category == Category::kTokenEmbd)) {
    if (falcon || t.ne[0] % block_of(new_type) != 0) {
      new_type = kQ8_0;
    } else if (new_type != kQ8_0) {
      new_type = kQ6_K;
    }
    if (new_type != recipe.default_type)
      why = category == Category::kOutput ? "output tensor" : "token embedding tied to the output";
  } else if (is_attn_v(category)) {
    if ((ftype == kFtypeQ4_K_M || ftype == kFtypeQ5_K_M) && use_more_bits(qs.i_attention_wv, qs.n_attention_wv)) {
      new_type = kQ6_K;
      why = fmt::format("use_more_bits: attn_v {} of {}", qs.i_attention_wv, qs.n_attention_wv);
    } else if (ftype == kFtypeQ4_K_S && qs.i_attention_wv < 4) {
      new_type = kQ5_K;
      why = fmt::format("Q4_K_S: attn_v {} of the first 4", qs.i_attention_wv);
    }
    if (hints.llama_70b && new_type == kQ4_K) {
      new_type = kQ5_K;
      why = "70B model: attn_v";
    }
    if (hints.n_expert == 8) {
      new_type = kQ8_0;
      why = "8 experts: attn_v";
    }
    ++qs.i_attention_wv;
  } else if (category == Category::kAttnK) {
    if (hints.n_expert == 8) {
      new_type = kQ8_0;
      why = "8 experts: attn_k";
    }
  } else if (category == Category::kFfnDown) {
    int i_layer = qs.i_ffn_down;
    const int n_layer = qs.n_ffn_down;
    if (hints.n_expert > 1) {
      i_layer = layer_index(t.name);
      if (i_layer < 0 || i_layer >= n_layer)
        throw InputError(
            fmt::format("tensor '{}': no layer index in [0, {}) in its name, which llama.cpp's rules "
                        "need for a model with experts",
                        printable(t.name), n_layer));
    }
    if (ftype == kFtypeQ4_K_M) {
      if (falcon) {
        new_type = i_layer < n_layer / 16 ? kQ6_K : use_more_bits(i_layer, n_layer) ? kQ5_K : kQ4_K;
      } else if (use_more_bits(i_layer, n_layer)) {
        new_type = kQ6_K;
      }
    } else if (ftype == kFtypeQ5_K_M && use_more_bits(i_layer, n_layer)) {
      new_type = kQ6_K;
    } else if (ftype == kFtypeQ4_K_S && !falcon && i_layer < n_layer / 8) {
      new_type = kQ5_K;
    }
    if (new_type != recipe.default_type)
      why = fmt::format("{}: ffn_down layer {} of {}", ftype == kFtypeQ4_K_S ? "first eighth" : "use_more_bits",
                        i_layer, n_layer);
    ++qs.i_ffn_down;
  } else if (category == Category::kAttnOutput) {
    if (!falcon && hints.n_expert == 8 && (ftype == kFtypeQ4_K_M || ftype == kFtypeQ4_K_S)) {
      new_type = kQ5_K;
      why = "8 experts: attn_output";
    }
  }
  // llama.cpp's branch for fused attn_qkv (Q5_K in Q4_K_M, Q6_K in Q5_K_M)
  // is never reached: attn_qkv counts as attn_v, whose branch comes first.
  return new_type;
}

// tensor_type_fallback: a row that is not a whole number of the type's
// blocks. llama.cpp has no fallback for Q8_0 and Q4_0 (it stops); gpumem
// uses its last resort, F16, for them too.
uint32_t fallback(const TensorShape& t, uint32_t type, std::string& why) {
  if (t.ne[0] % block_of(type) == 0) return type;
  uint32_t to = kF16;
  switch (type) {
    case kQ4_K: to = kQ5_0; break;
    case kQ5_K: to = kQ5_1; break;
    case kQ6_K: to = kQ8_0; break;
    default: break;
  }
  if (t.ne[0] % block_of(to) != 0) to = kF16;
  why = fmt::format("row of {} is not a multiple of {}'s {}: fallback {}", t.ne[0], type_name(type), block_of(type),
                    type_name(to));
  return to;
}

bool is_float(uint32_t type) { return type == kF32 || type == kF16 || type == kBF16; }

}  // namespace

const std::vector<QuantizeRecipe>& quantize_recipes() {
  // docs/quantize.md's table says what each gives.
  static const std::vector<QuantizeRecipe> recipes = {
      {"q8_0", kQ8_0, kFtypeQ8_0, true},     {"q6_k", kQ6_K, kFtypeQ6_K, true},
      {"q5_k_m", kQ5_K, kFtypeQ5_K_M, true}, {"q5_k_s", kQ5_K, kFtypeQ5_K_S, true},
      {"q5_1", kQ5_1, kFtypeQ5_1, true},     {"q5_0", kQ5_0, kFtypeQ5_0, true},
      {"q4_k_m", kQ4_K, kFtypeQ4_K_M, true}, {"q4_k_s", kQ4_K, kFtypeQ4_K_S, true},
      {"q4_k", kQ4_K, kFtypeQ4_K_M, false},  {"q4_0", kQ4_0, kFtypeQ4_0, true},
      {"f16", kF16, kFtypeF16, false},       {"bf16", kBF16, kFtypeBF16, false},
      {"f32", kF32, kFtypeAllF32, false},
  };
  return recipes;
}

const QuantizeRecipe* quantize_recipe_named(std::string_view name) {
  for (const auto& r : quantize_recipes()) {
    if (std::ranges::equal(r.name, name, [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
        }))
      return &r;
  }
  return nullptr;
}

std::vector<TypeChoice> choose_types(const std::vector<TensorShape>& tensors, const ModelHints& hints,
                                     const QuantizeOptions& options) {
  const QuantizeRecipe* recipe = quantize_recipe_named(options.type);
  if (!recipe) {
    std::string names;
    for (const auto& r : quantize_recipes()) names += (names.empty() ? "" : ", ") + std::string(r.name);
    throw InputError(
        fmt::format(GPUMEM_FLAG_TYPE ": '{}' is not a type gpumem writes ({})", printable(options.type), names));
  }
  std::regex keep;
  if (!options.keep.empty()) {
    try {
      keep = std::regex(options.keep, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      throw InputError(
          fmt::format(GPUMEM_FLAG_KEEP ": '{}' is not a regular expression: {}", printable(options.keep), e.what()));
    }
  }
  State qs;
  for (const auto& t : tensors) {
    const Category c = category_of(t.name);
    if (is_attn_v(c)) ++qs.n_attention_wv;
    if (c == Category::kOutput) qs.tied_embeddings = false;
  }
  // llama.cpp reads {arch}.block_count; other inputs count their layers.
  qs.n_ffn_down = hints.n_layer;
  if (qs.n_ffn_down == 0)
    for (const auto& t : tensors) qs.n_ffn_down = std::max(qs.n_ffn_down, layer_index(t.name) + 1);
  ModelHints model = hints;
  model.n_layer = qs.n_ffn_down;
  // llama.cpp visits tensors by layer, then name; its counters follow that order.
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::vector<int> layers(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) layers[i] = layer_index(tensors[i].name);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return layers[a] != layers[b] ? layers[a] < layers[b] : tensors[a].name < tensors[b].name;
  });
  const bool quantized_default = ggml_type(recipe->default_type)->block_size > 1;
  std::vector<TypeChoice> out(tensors.size());
  for (const size_t i : order) {
    const TensorShape& t = tensors[i];
    TypeChoice& choice = out[i];
    const GgmlType* source = ggml_type_named(t.dtype);
    if (!source)
      throw InputError(fmt::format("tensor '{}': dtype {} has no GGUF type", printable(t.name), printable(t.dtype)));
    if (t.ne.empty() || t.ne.size() > 4)
      throw InputError(fmt::format("tensor '{}': {} dimensions; GGUF holds 1 to 4", printable(t.name), t.ne.size()));
    choice.type = source->id;
    std::string why = not_quantized_because(t, hints);
    uint32_t target = source->id;
    if (why.empty()) {
      target = recipe->default_type;
      if (quantized_default) {
        if (recipe->mixture && !options.pure) target = mixture_type(qs, t, category_of(t.name), *recipe, model, why);
        target = fallback(t, target, why);
      }
    }
    // --keep is applied after the rules, so that it does not move which
    // layers get more bits.
    if (!options.keep.empty() && std::regex_match(t.name, keep)) {
      choice.why = GPUMEM_FLAG_KEEP;
      continue;
    }
    choice.why = why;
    if (target == source->id) continue;
    if (source->block_size == 1 && !is_float(source->id)) {
      choice.why = "not a float tensor";
      continue;
    }
    if (!is_float(source->id))
      throw InputError(fmt::format(
          "tensor '{}': a {} tensor; gpumem converts F32, F16 and BF16 tensors only (it does not requantize): "
          "leave it as it is with " GPUMEM_FLAG_KEEP,
          printable(t.name), source->name));
    choice.type = target;
    choice.convert = true;
  }
  return out;
}

}  // namespace gpumem::weights
