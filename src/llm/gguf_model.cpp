// A GGUF file's shape from llama.cpp's key-values. Keys are prefixed with
// the architecture ("llama.block_count"); see llama.cpp's llama-arch.cpp
// (LLM_KV_*) for their names. Values arrive as the reader's text.
#include <charconv>
#include <cstdint>

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "llm/model_sources.h"
#include "llm/sliding_windows.h"

namespace gpumem::llm {
namespace {

class Keys {
 public:
  explicit Keys(const weights::WeightFile& f) : file_(f) {
    const auto it = f.metadata.find("general.architecture");
    if (it == f.metadata.end())
      throw InputError(fmt::format("{}: no general.architecture key; not a llama.cpp model", printable(f.path)));
    arch_ = it->second;
  }
  const std::string& arch() const { return arch_; }

  // ARCH.key as a number; nullopt when absent.
  std::optional<uint64_t> number(const std::string& key) const {
    const std::string full = arch_ + "." + key;
    const auto it = file_.metadata.find(full);
    if (it == file_.metadata.end()) return std::nullopt;
    const std::string& text = it->second;
    uint64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || v > UINT32_MAX) {
      throw InputError(
          fmt::format("{}: key {}: '{}' is not one whole number below 2^32 (per-layer values are not supported)",
                      printable(file_.path), full, printable(text)));
    }
    return v;
  }
  uint64_t required(const std::string& key) const {
    const auto v = number(key);
    if (!v || *v == 0)
      throw InputError(fmt::format("{}: key {}.{} is missing or zero", printable(file_.path), arch_, key));
    return *v;
  }

 private:
  const weights::WeightFile& file_;
  std::string arch_;
};

}  // namespace

LlmModel model_from_gguf(const weights::WeightFile& file) {
  const Keys keys(file);
  LlmModel m;
  m.source = file.path;
  m.format = "gguf";
  m.architecture = keys.arch();
  if (keys.number("attention.kv_lora_rank"))
    throw InputError(
        fmt::format("{}: key {}.attention.kv_lora_rank: multi-head latent attention (DeepSeek V2/V3) "
                    "is not modelled by gpumem llm yet",
                    printable(file.path), m.architecture));
  m.n_layer = static_cast<uint32_t>(keys.required("block_count"));
  m.n_embd = keys.required("embedding_length");
  m.n_head = static_cast<uint32_t>(keys.required("attention.head_count"));
  m.n_head_kv = static_cast<uint32_t>(keys.number("attention.head_count_kv").value_or(m.n_head));
  m.n_ff = keys.number("feed_forward_length").value_or(0);
  m.n_ctx_train = keys.number("context_length").value_or(0);
  m.head_dim_k = keys.number("attention.key_length").value_or(m.n_embd / m.n_head);
  m.head_dim_v = keys.number("attention.value_length").value_or(m.n_embd / m.n_head);
  m.sliding_window = keys.number("attention.sliding_window").value_or(0);
  m.n_vocab = keys.number("vocab_size").value_or(0);
  check_shape(m, file.path);
  // llama.cpp fixes which layers slide per architecture (llm/sliding_windows.h);
  // newer GGUFs may give the period (a per-layer array falls back to it).
  std::optional<uint64_t> period;
  try {
    period = keys.number("attention.sliding_window_pattern");
  } catch (const InputError&) {
  }
  apply_window_rules(m, nullptr, period);
  bool has_output = false;
  for (const auto& t : file.tensors) {
    m.tensors.push_back({t.name, t.shape, t.dtype, t.bytes, layer_index(t.name)});
    // llama.cpp's names, or Hugging Face's in a GGUF that gpumem quantize
    // made from safetensors (it keeps the input's names).
    if (t.name == "output.weight" || t.name == "lm_head.weight") has_output = true;
    if ((t.name == "token_embd.weight" || t.name == "model.embed_tokens.weight") && t.shape.size() == 2)
      m.n_vocab = t.shape[1];
  }
  if (m.n_vocab == 0)
    throw InputError(
        fmt::format("{}: no token_embd.weight tensor and no {}.vocab_size key", printable(file.path), m.architecture));
  check_shape(m, file.path);
  m.tied_embeddings = !has_output;
  m.weight_dtype = dominant_dtype(m.tensors);
  return m;
}

}  // namespace gpumem::llm
