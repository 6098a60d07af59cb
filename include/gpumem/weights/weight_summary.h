#pragma once
// What a weight file holds, summed up: totals by dtype and by layer, and the
// tensors stored twice (tied embeddings, duplicated weights), found by
// their bytes and counted once in `unique_bytes`.
#include <cstdint>
#include <string>
#include <vector>

#include "gpumem/weights/weight_file.h"

namespace gpumem::weights {

struct Total {
  std::string key;  // a dtype ("BF16", "Q4_K") or a layer ("model.layers.12", "blk.12")
  uint64_t tensors = 0;
  uint64_t elements = 0;
  uint64_t bytes = 0;
};

struct DuplicateGroup {
  std::vector<std::string> names;  // tensors with the same bytes, the first one kept
  uint64_t bytes = 0;              // of one of them
};

struct WeightSummary {
  WeightFile file;
  uint64_t total_bytes = 0;   // every tensor's data
  uint64_t unique_bytes = 0;  // duplicates counted once
  uint64_t elements = 0;
  std::vector<Total> by_dtype;  // largest first
  std::vector<Total> by_layer;  // in the order layers first appear
  std::vector<DuplicateGroup> duplicates;
  bool duplicates_checked = false;  // false when the data was not read (ONNX, or not asked)
};

// Reads any weight file by its content: GGUF (magic "GGUF"), safetensors
// (a header length then JSON), a sharded checkpoint's index
// (*.safetensors.index.json), a directory holding one of these, or an ONNX
// model's initializers.
WeightFile read_weight_file(const std::string& path);

// The layer a tensor belongs to: its name up to the first all-digit part
// ("model.layers.12.mlp.up_proj.weight" -> "model.layers.12"); "" when
// it has none (embeddings, the final norm).
std::string layer_of(const std::string& tensor_name);

// Sums; with `find_duplicates`, reads the data of tensors of equal type and
// size (a hash, then a byte comparison) to find identical ones.
WeightSummary summarize(WeightFile file, bool find_duplicates = true);

}  // namespace gpumem::weights
