// LlmModel's sums and the dispatch of load_llm_model over the three kinds
// of MODEL (GGUF, Hugging Face folder, bare config.json).
#include "gpumem/llm/llm_model.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "common/file_kind.h"
#include "gpumem/common/error.h"
#include "gpumem/common/files.h"
#include "gpumem/weights/gguf.h"
#include "gpumem/weights/weight_summary.h"
#include "llm/model_sources.h"

namespace gpumem::llm {
namespace fs = std::filesystem;

uint64_t LlmModel::parameters() const {
  uint64_t n = 0;
  for (const auto& t : tensors) {
    uint64_t e = 1;
    for (uint64_t d : t.shape) e *= d;
    n += e;
  }
  return n;
}

uint64_t LlmModel::weight_bytes() const {
  uint64_t n = 0;
  for (const auto& t : tensors) n += t.bytes;
  return n;
}

bool LlmModel::layer_is_windowed(uint32_t i) const {
  if (sliding_window == 0) return false;
  if (swa_layers.empty()) return true;
  return i < swa_layers.size() && swa_layers[i];
}

std::optional<uint64_t> dtype_bytes(const std::string& dtype, uint64_t row_elements, uint64_t rows) {
  if (const uint64_t b = weights::safetensors_dtype_bytes(dtype); b > 0) return b * row_elements * rows;
  const weights::GgmlType* t = weights::ggml_type_named(dtype);
  if (t == nullptr || t->block_size == 0 || row_elements % t->block_size != 0) return std::nullopt;
  return row_elements / t->block_size * t->type_size * rows;
}

int layer_index(const std::string& name) {
  const std::string layer = weights::layer_of(name);
  if (layer.empty()) return -1;
  const size_t dot = layer.rfind('.');
  const std::string digits = dot == std::string::npos ? layer : layer.substr(dot + 1);
  if (digits.size() > 6) return -1;
  return std::stoi(digits);
}

namespace {

std::string read_text(const std::string& path) {
  // A config.json is a few KiB; 16 MiB bounds what a wrong path can cost.
  bool gzipped = false;
  return read_file(path, 16u << 20, "too large for a config.json", &gzipped);
}

}  // namespace

std::string dominant_dtype(const std::vector<LlmTensor>& tensors) {
  std::map<std::string, uint64_t> by;
  for (const auto& t : tensors) by[t.dtype] += t.bytes;
  std::string best;
  uint64_t most = 0;
  for (const auto& [d, b] : by) {
    if (b > most) best = d, most = b;
  }
  return best;
}

void check_shape(const LlmModel& m, const std::string& where) {
  // Bounds far past today's largest models (Llama 3.1 405B: 126 layers,
  // 16,384 wide, 128 heads; vocabularies up to 256K), small enough that
  // every product below 2^63 holds: a layer's experts (2^17 x 2^19 x 2^10
  // values), a cache of 2^26 cells of 2^35 bytes.
  const struct {
    const char* key;
    uint64_t value, limit;
  } bounds[] = {{"layers", m.n_layer, 1u << 10},         {"hidden size", m.n_embd, 1u << 17},
                {"attention heads", m.n_head, 1u << 10}, {"KV heads", m.n_head_kv, 1u << 10},
                {"head dim", m.head_dim_k, 1u << 12},    {"head dim (V)", m.head_dim_v, 1u << 12},
                {"feed-forward size", m.n_ff, 1u << 19}, {"vocabulary", m.n_vocab, 1u << 22},
                {"experts", m.n_expert, 1u << 10},       {"sliding window", m.sliding_window, 1ull << 26}};
  for (const auto& b : bounds) {
    if (b.value > b.limit)
      throw InputError(
          fmt::format("{}: {} is {}, more than the {} gpumem accepts", printable(where), b.key, b.value, b.limit));
  }
  if (m.n_head_kv == 0 || m.n_head_kv > m.n_head || m.n_head % m.n_head_kv != 0 || m.head_dim_k == 0 ||
      m.head_dim_v == 0)
    throw InputError(fmt::format("{}: {} attention heads, {} KV heads, head dim {}: not a grouped-query decoder",
                                 printable(where), m.n_head, m.n_head_kv, m.head_dim_k));
}

namespace {

// A Hugging Face folder: config.json for the shape, the safetensors files
// (when present) for the tensors as stored.
LlmModel from_folder(const std::string& dir) {
  const fs::path config = fs::path(dir) / "config.json";
  if (!fs::exists(config)) throw InputError(fmt::format("{}: a folder without config.json", dir));
  LlmModel m = model_from_hf_config(read_text(config.string()), config.string());
  m.source = dir;
  bool has_weights = false;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 12 && name.ends_with(".safetensors")) has_weights = true;
  }
  if (!has_weights) return m;
  const weights::WeightFile file = weights::read_weight_file(dir);
  m.format = "safetensors";
  m.tensors.clear();
  for (const auto& t : file.tensors) {
    // safetensors lists the outermost dimension first; the rest of gpumem llm
    // reads the innermost first, as GGUF stores it.
    std::vector<uint64_t> ne(t.shape.rbegin(), t.shape.rend());
    m.tensors.push_back({t.name, ne, t.dtype, t.bytes, layer_index(t.name)});
  }
  m.weight_dtype = dominant_dtype(m.tensors);
  return m;
}

}  // namespace

LlmModel load_llm_model(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return from_folder(path);
  if (!fs::exists(path, ec)) throw InputError(fmt::format("{}: no such file or folder", path));
  const FileKind kind = file_kind_at(path);
  if (auto wrong = wrong_kind_error(kind, path, {FileKind::Gguf, FileKind::ModelConfig},
                                    "a GGUF file, a model folder or a config.json"))
    throw InputError(*wrong);
  if (path.ends_with(".json") || kind == FileKind::ModelConfig) {
    LlmModel m = model_from_hf_config(read_text(path), path);
    m.source = path;
    return m;
  }
  return model_from_gguf(weights::read_gguf(path));
}

}  // namespace gpumem::llm
