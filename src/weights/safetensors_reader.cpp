#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "gpumem/common/error.h"
#include "gpumem/common/mapped_file.h"
#include "gpumem/weights/weight_file.h"

namespace gpumem::weights {
namespace {

// safetensors refuses headers over 100 MB (its MAX_HEADER_SIZE).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

uint64_t little_endian_u64(std::string_view b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[static_cast<size_t>(i)]);
  return v;
}

// A non-negative integer of the header, or an error naming where.
uint64_t unsigned_of(const nlohmann::json& j, const std::string& path, const std::string& what) {
  if (!j.is_number_unsigned()) throw InputError(fmt::format("{}: {}: not a non-negative integer", path, what));
  return j.get<uint64_t>();
}

}  // namespace

uint64_t safetensors_dtype_bytes(const std::string& dtype) {
  static const std::map<std::string, uint64_t, std::less<>> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
      {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8}};
  const auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

WeightFile read_safetensors(const std::string& path) {
  const MappedFile file(path);
  return parse_safetensors(file.bytes(), path);
}

WeightFile parse_safetensors(std::string_view bytes, const std::string& path) {
  WeightFile out;
  out.path = path;
  out.format = "safetensors";
  out.file_bytes = bytes.size();
  if (bytes.size() < 8)
    throw InputError(fmt::format("{}: {} bytes: too short for a safetensors header", path, bytes.size()));
  const uint64_t header = little_endian_u64(bytes);
  if (header > kMaxHeaderBytes || header > bytes.size() - 8) {
    throw InputError(
        fmt::format("{}: byte 0: a header of {} bytes does not fit in the file's {} bytes (or the 100 MB "
                    "safetensors allows): not a safetensors file, or a truncated one",
                    path, header, bytes.size()));
  }
  nlohmann::json doc;
  try {
    doc = parse_bounded_json(bytes.substr(8, header), path);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(fmt::format("{}: byte {}: the header is not JSON ({})", path, 8 + e.byte, e.what()));
  } catch (const nlohmann::json::exception& e) {  // a number past a double (out_of_range.406), ...
    throw InputError(fmt::format("{}: the header is not JSON gpumem can read ({})", path, e.what()));
  }
  if (!doc.is_object()) throw InputError(fmt::format("{}: byte 8: the header is not a JSON object", path));
  const uint64_t data_start = 8 + header;
  const uint64_t data_bytes = bytes.size() - data_start;
  for (const auto& [name, entry] : doc.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw InputError(fmt::format("{}: __metadata__ is not an object", path));
      for (const auto& [k, v] : entry.items()) out.metadata[k] = v.is_string() ? v.get<std::string>() : json_text(v);
      continue;
    }
    const std::string where = fmt::format("tensor '{}'", printable(name));
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets")) {
      throw InputError(fmt::format("{}: {}: needs dtype, shape and data_offsets", path, where));
    }
    TensorEntry t;
    t.name = name;
    t.file = path;
    t.dtype = entry["dtype"].is_string() ? entry["dtype"].get<std::string>() : "";
    const uint64_t width = safetensors_dtype_bytes(t.dtype);
    if (width == 0) throw InputError(fmt::format("{}: {}: unknown dtype '{}'", path, where, printable(t.dtype)));
    if (!entry["shape"].is_array() || entry["shape"].size() > 64) {
      throw InputError(fmt::format("{}: {}: shape is not a list of at most 64 dimensions", path, where));
    }
    uint64_t elements = 1;
    for (const auto& d : entry["shape"]) {
      const uint64_t dim = unsigned_of(d, path, where + ": shape");
      if (dim != 0 && elements > UINT64_MAX / dim)
        throw InputError(fmt::format("{}: {}: shape overflows", path, where));
      elements *= dim;
      t.shape.push_back(dim);
    }
    const auto& offsets = entry["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2) {
      throw InputError(fmt::format("{}: {}: data_offsets is not [begin, end]", path, where));
    }
    const uint64_t begin = unsigned_of(offsets[0], path, where + ": data_offsets"),
                   end = unsigned_of(offsets[1], path, where + ": data_offsets");
    if (begin > end || end > data_bytes) {
      throw InputError(
          fmt::format("{}: {}: data_offsets [{}, {}) outside the {} data bytes", path, where, begin, end, data_bytes));
    }
    if (elements > UINT64_MAX / width || end - begin != elements * width) {
      throw InputError(fmt::format("{}: {}: {} bytes of data for {} {} values ({} bytes)", path, where, end - begin,
                                   elements, t.dtype, elements * width));
    }
    t.offset = data_start + begin;
    t.bytes = end - begin;
    out.tensors.push_back(std::move(t));
  }
  // The data is the tensors end to end, as the reference implementation
  // requires: no overlap, no hole, nothing after.
  std::vector<const TensorEntry*> by_offset;
  for (const auto& t : out.tensors) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](const auto* a, const auto* b) {
    return a->offset != b->offset ? a->offset < b->offset : a->bytes < b->bytes;
  });
  uint64_t at = data_start;
  for (const auto* t : by_offset) {
    if (t->offset != at) {
      throw InputError(fmt::format("{}: tensor '{}': its data starts at byte {}, where {} {} expected", path,
                                   printable(t->name), t->offset, at, t->offset < at ? "(overlapping) was" : "was"));
    }
    at += t->bytes;
  }
  if (at != bytes.size()) {
    throw InputError(fmt::format("{}: {} bytes after the last tensor's data", path, bytes.size() - at));
  }
  // File order: the header's key order is not kept by nlohmann's object, so
  // list tensors by where their data lies.
  std::sort(out.tensors.begin(), out.tensors.end(), [](const auto& a, const auto& b) { return a.offset < b.offset; });
  return out;
}

WeightFile read_safetensors_index(const std::string& index_path) {
  const MappedFile file(index_path);
  nlohmann::json doc;
  try {
    doc = parse_bounded_json(file.bytes(), index_path);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(fmt::format("{}: byte {}: not JSON ({})", index_path, e.byte, e.what()));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: not JSON gpumem can read ({})", index_path, e.what()));
  }
  if (!doc.is_object() || !doc.contains("weight_map") || !doc["weight_map"].is_object()) {
    throw InputError(fmt::format("{}: no \"weight_map\" object: not a safetensors index", index_path));
  }
  const auto dir = std::filesystem::path(index_path).parent_path();
  // Each shard read once, its tensors found by name in a hash map: a
  // linear search per tensor took 87 s on 150,000 tensors in one shard.
  struct Shard {
    WeightFile file;
    std::unordered_map<std::string_view, std::size_t> by_name;
  };
  std::map<std::string, Shard> shards;
  WeightFile out;
  out.path = index_path;
  out.format = "safetensors-sharded";
  if (doc.contains("metadata") && doc["metadata"].is_object()) {
    for (const auto& [k, v] : doc["metadata"].items())
      out.metadata[k] = v.is_string() ? v.get<std::string>() : json_text(v);
  }
  for (const auto& [tensor, shard] : doc["weight_map"].items()) {
    if (!shard.is_string())
      throw InputError(fmt::format("{}: tensor '{}': its shard is not a file name", index_path, printable(tensor)));
    const std::string name = shard.get<std::string>();
    if (name.find('/') != std::string::npos || name == "..") {
      throw InputError(fmt::format("{}: tensor '{}': shard '{}' is not a file beside the index", index_path,
                                   printable(tensor), printable(name)));
    }
    auto it = shards.find(name);
    if (it == shards.end()) {
      it = shards.emplace(name, Shard{read_safetensors((dir / name).string()), {}}).first;
      Shard& opened = it->second;
      opened.by_name.reserve(opened.file.tensors.size());
      for (std::size_t i = 0; i < opened.file.tensors.size(); ++i)
        opened.by_name.emplace(opened.file.tensors[i].name, i);
      out.file_bytes += opened.file.file_bytes;
    }
    const auto found = it->second.by_name.find(tensor);
    if (found == it->second.by_name.end()) {
      throw InputError(fmt::format("{}: tensor '{}': not in its shard {}", index_path, printable(tensor), name));
    }
    out.tensors.push_back(it->second.file.tensors[found->second]);
  }
  return out;
}

}  // namespace gpumem::weights
