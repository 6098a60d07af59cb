#pragma once
// Weight files as gpumem reads them: safetensors (single or sharded), GGUF
// and ONNX initializers become one table of tensors with their type, shape
// and where their bytes lie. Readers map the file and read only headers;
// every count, offset and length they read is checked against the file.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace gpumem::weights {

struct TensorEntry {
  std::string name;
  std::string dtype;            // safetensors' ("F32", "BF16", "I64"...) or GGUF's type name ("F16", "Q4_K"...)
  std::vector<uint64_t> shape;  // as the file lists it (GGUF: ne[0] first)
  std::string file;             // the file holding the data (a shard for sharded safetensors)
  uint64_t offset = 0;          // of the first data byte, from the start of `file`
  uint64_t bytes = 0;
};

struct WeightFile {
  std::string path;                             // as given
  std::string format;                           // "safetensors", "safetensors-sharded", "gguf", "onnx"
  std::vector<TensorEntry> tensors;             // in file order
  std::map<std::string, std::string> metadata;  // safetensors' __metadata__, GGUF's key-values (as text)
  uint64_t file_bytes = 0;                      // every file's size together
};

// safetensors: an 8-byte little-endian header length, a JSON header of
// {name: {dtype, shape, data_offsets: [begin, end)}} (offsets from the end
// of the header), then the data. Throws InputError naming the file, the
// tensor and the problem for anything out of place: a header past the
// file's end, offsets outside the data, overlapping tensors, a byte count
// that does not match dtype x shape, an unknown dtype.
WeightFile read_safetensors(const std::string& path);
// The same for a file's bytes already in memory (`path` names it in errors
// and in the entries).
WeightFile parse_safetensors(std::string_view bytes, const std::string& path);

// A sharded checkpoint: model.safetensors.index.json ({"weight_map":
// {tensor: shard file}}) and the shards it names beside it; each tensor is
// read from its shard and must be there.
WeightFile read_safetensors_index(const std::string& index_path);

// Bytes per element of a safetensors dtype; 0 for an unknown one.
uint64_t safetensors_dtype_bytes(const std::string& dtype);

// A tensor to write: its bytes as they will lie in the file.
struct TensorData {
  std::string name;
  std::string dtype;
  std::vector<uint64_t> shape;
  std::string data;
};

// A safetensors image: header (keys sorted, padded with spaces to a
// multiple of 8 bytes, as the reference writer does), then the data in the
// order given. Throws InputError when a tensor's bytes do not match its
// dtype and shape.
std::string write_safetensors(const std::vector<TensorData>& tensors,
                              const std::map<std::string, std::string>& metadata = {});

}  // namespace gpumem::weights
