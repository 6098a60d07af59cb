#include "gpumem/weights/weight_summary.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "common/file_kind.h"
#include "gpumem/common/error.h"
#include "gpumem/common/mapped_file.h"
#include "gpumem/model/onnx_loader.h"
#include "gpumem/weights/gguf.h"

namespace gpumem::weights {
namespace {

// The first bytes, to tell formats apart.
std::string head_of(const std::string& path) {
  const MappedFile f(path);
  return std::string(f.bytes().substr(0, 4096));
}

WeightFile onnx_initializers(const std::string& path) {
  const Model m = load_onnx_model(path);
  WeightFile out;
  out.path = path;
  out.format = "onnx";
  out.file_bytes = std::filesystem::file_size(path);
  for (int id : m.graph.initializers) {
    const Tensor& t = m.graph.tensors[static_cast<size_t>(id)];
    TensorEntry e;
    e.name = t.name;
    e.dtype = std::string(dtype_name(t.dtype));
    if (t.dims) {
      for (const auto& d : *t.dims) e.shape.push_back(d.known() ? static_cast<uint64_t>(d.value) : 0);
    }
    const auto elements = t.elements();
    e.bytes = elements ? storage_bytes(t.dtype, *elements).value_or(0) : 0;
    out.tensors.push_back(std::move(e));  // no file offset: the data sits inside the protobuf
  }
  return out;
}

uint64_t elements_of(const TensorEntry& t) {
  uint64_t n = 1;
  for (uint64_t d : t.shape) n *= d;
  return n;
}

// FNV-1a over the bytes: only to group candidates; equality is confirmed
// byte for byte.
uint64_t fnv1a(std::string_view bytes) {
  uint64_t h = 1469598103934665603ull;
  for (const char c : bytes) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

}  // namespace

WeightFile read_weight_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path dir(path);
    if (fs::exists(dir / "model.safetensors.index.json"))
      return read_safetensors_index((dir / "model.safetensors.index.json").string());
    std::vector<fs::path> found;
    for (const auto& entry : fs::directory_iterator(dir)) {
      const std::string name = entry.path().filename().string();
      if (name.ends_with(".safetensors") || name.ends_with(".gguf")) found.push_back(entry.path());
    }
    if (found.size() != 1) {
      throw InputError(
          fmt::format("{}: a directory with {} weight files (*.safetensors, *.gguf) and no "
                      "model.safetensors.index.json: give one file",
                      path, found.size()));
    }
    return read_weight_file(found.front().string());
  }
  if (path.ends_with(".index.json")) return read_safetensors_index(path);
  const std::string head = head_of(path);
  // An index under another name (a renamed or downloaded copy) is still one.
  if (file_kind(head) == FileKind::SafetensorsIndex) return read_safetensors_index(path);
  if (head.rfind("GGUF", 0) == 0) return read_gguf(path);
  if (head.size() >= 9 && head[8] == '{') return read_safetensors(path);
  if (path.ends_with(".onnx") || file_kind(head) == FileKind::OnnxModel) return onnx_initializers(path);
  if (auto wrong = wrong_kind_error(head, path, {}, "a weight file (GGUF, safetensors, a safetensors index, ONNX)"))
    throw InputError(*wrong);
  throw InputError(
      fmt::format("{}: not a weight file gpumem reads (GGUF, safetensors, a safetensors index, ONNX)", path));
}

std::string layer_of(const std::string& name) {
  size_t start = 0;
  while (start <= name.size()) {
    const size_t dot = name.find('.', start);
    const std::string part = name.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!part.empty() &&
        std::all_of(part.begin(), part.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
      return name.substr(0, dot == std::string::npos ? name.size() : dot);
    }
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return "";
}

WeightSummary summarize(WeightFile file, bool find_duplicates) {
  WeightSummary s;
  std::map<std::string, Total> dtypes;
  std::map<std::string, size_t> layer_index;
  for (const auto& t : file.tensors) {
    const uint64_t elements = elements_of(t);
    s.total_bytes += t.bytes;
    s.elements += elements;
    auto& d = dtypes[t.dtype];
    d.key = t.dtype;
    d.tensors += 1;
    d.elements += elements;
    d.bytes += t.bytes;
    const std::string layer = layer_of(t.name);
    auto [it, fresh] = layer_index.try_emplace(layer, s.by_layer.size());
    if (fresh) s.by_layer.push_back({layer, 0, 0, 0});
    auto& l = s.by_layer[it->second];
    l.tensors += 1;
    l.elements += elements;
    l.bytes += t.bytes;
  }
  for (auto& [key, total] : dtypes) s.by_dtype.push_back(total);
  std::stable_sort(s.by_dtype.begin(), s.by_dtype.end(),
                   [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  s.unique_bytes = s.total_bytes;
  const bool has_data =
      std::all_of(file.tensors.begin(), file.tensors.end(), [](const auto& t) { return !t.file.empty(); });
  if (find_duplicates && has_data) {
    s.duplicates_checked = true;
    // Candidates: same type and size. Their bytes are hashed, then compared.
    std::map<std::pair<std::string, uint64_t>, std::vector<size_t>> same;
    for (size_t i = 0; i < file.tensors.size(); ++i) {
      if (file.tensors[i].bytes > 0) same[{file.tensors[i].dtype, file.tensors[i].bytes}].push_back(i);
    }
    std::map<std::string, std::unique_ptr<MappedFile>> mapped;
    auto data = [&](const TensorEntry& t) {
      auto& m = mapped[t.file];
      if (!m) m = std::make_unique<MappedFile>(t.file);
      return m->bytes().substr(t.offset, t.bytes);
    };
    for (const auto& [key, members] : same) {
      if (members.size() < 2) continue;
      std::map<uint64_t, std::vector<size_t>> by_hash;
      for (size_t i : members) by_hash[fnv1a(data(file.tensors[i]))].push_back(i);
      for (const auto& [hash, group] : by_hash) {
        std::vector<bool> taken(group.size(), false);
        for (size_t a = 0; a < group.size(); ++a) {
          if (taken[a]) continue;
          DuplicateGroup dup{{file.tensors[group[a]].name}, file.tensors[group[a]].bytes};
          const auto first = data(file.tensors[group[a]]);
          for (size_t b = a + 1; b < group.size(); ++b) {
            if (taken[b] || data(file.tensors[group[b]]) != first) continue;
            taken[b] = true;
            dup.names.push_back(file.tensors[group[b]].name);
            s.unique_bytes -= dup.bytes;
          }
          if (dup.names.size() > 1) s.duplicates.push_back(std::move(dup));
        }
      }
    }
  }
  s.file = std::move(file);
  return s;
}

}  // namespace gpumem::weights
