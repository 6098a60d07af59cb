// safetensors through mmap: what the writer writes the reader reads back;
// sharded checkpoints; identical tensors counted once; and every kind of
// damage a one-line error, never a crash.
#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "gpumem/common/error.h"
#include "gpumem/weights/weight_summary.h"

namespace gpumem::weights {
namespace {

std::string temp(const std::string& name) {
  return testing::TempDir() + "gpumem_st_" + std::to_string(getpid()) + "_" + name;
}

std::string save(const std::string& name, const std::string& bytes) {
  const std::string path = temp(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string filled(size_t bytes, char seed) {
  std::string s(bytes, '\0');
  for (size_t i = 0; i < bytes; ++i) s[i] = static_cast<char>(seed + static_cast<char>(i * 7));
  return s;
}

std::vector<TensorData> small_model() {
  return {{"model.embed_tokens.weight", "BF16", {32, 8}, filled(32 * 8 * 2, 1)},
          {"model.layers.0.mlp.up_proj.weight", "F32", {16, 8}, filled(16 * 8 * 4, 2)},
          {"model.layers.1.mlp.up_proj.weight", "F32", {16, 8}, filled(16 * 8 * 4, 3)},
          {"model.norm.weight", "F32", {8}, filled(8 * 4, 4)},
          // Tied to the embedding: the same bytes under another name.
          {"lm_head.weight", "BF16", {32, 8}, filled(32 * 8 * 2, 1)}};
}

TEST(Safetensors, WhatTheWriterWritesTheReaderReadsBack) {
  const auto tensors = small_model();
  const std::string path = save("model.safetensors", write_safetensors(tensors, {{"format", "pt"}}));
  const WeightFile f = read_weight_file(path);
  EXPECT_EQ(f.format, "safetensors");
  EXPECT_EQ(f.metadata.at("format"), "pt");
  ASSERT_EQ(f.tensors.size(), tensors.size());
  uint64_t data = 0;
  for (const auto& t : tensors) data += t.data.size();
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const auto& want : tensors) {
    const auto it =
        std::find_if(f.tensors.begin(), f.tensors.end(), [&](const auto& t) { return t.name == want.name; });
    ASSERT_NE(it, f.tensors.end()) << want.name;
    EXPECT_EQ(it->dtype, want.dtype);
    EXPECT_EQ(it->shape, want.shape);
    EXPECT_EQ(bytes.substr(it->offset, it->bytes), want.data) << want.name;
    EXPECT_EQ(it->offset % 8, 0u) << "the data section is 8-byte aligned";
  }
  EXPECT_EQ(f.file_bytes, bytes.size());

  const WeightSummary s = summarize(f);
  EXPECT_EQ(s.total_bytes, data);
  EXPECT_EQ(s.unique_bytes, data - 32 * 8 * 2);  // the tied head once
  ASSERT_EQ(s.duplicates.size(), 1u);
  EXPECT_EQ(s.duplicates[0].names.size(), 2u);
  EXPECT_EQ(s.by_dtype.front().key, "F32");  // 1,056 bytes against BF16's 1,024
  EXPECT_EQ(s.by_dtype.front().bytes, 1056u);
  EXPECT_EQ(layer_of("model.layers.12.mlp.up_proj.weight"), "model.layers.12");
  EXPECT_EQ(layer_of("blk.3.attn_q.weight"), "blk.3");
  EXPECT_EQ(layer_of("model.norm.weight"), "");
  std::remove(path.c_str());
}

TEST(Safetensors, AShardedCheckpointIsReadThroughItsIndex) {
  const auto tensors = small_model();
  const std::string dir = temp("sharded");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/model-00001-of-00002.safetensors", std::ios::binary)
      << write_safetensors({tensors[0], tensors[1]});
  std::ofstream(dir + "/model-00002-of-00002.safetensors", std::ios::binary)
      << write_safetensors({tensors[2], tensors[3], tensors[4]});
  std::ofstream(dir + "/model.safetensors.index.json") << R"({"metadata": {"total_size": 2080}, "weight_map": {
        "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
        "model.layers.0.mlp.up_proj.weight": "model-00001-of-00002.safetensors",
        "model.layers.1.mlp.up_proj.weight": "model-00002-of-00002.safetensors",
        "model.norm.weight": "model-00002-of-00002.safetensors",
        "lm_head.weight": "model-00002-of-00002.safetensors"}})";
  const WeightFile f = read_weight_file(dir);  // the directory finds its index
  EXPECT_EQ(f.format, "safetensors-sharded");
  EXPECT_EQ(f.tensors.size(), 5u);
  const WeightSummary s = summarize(f);
  EXPECT_EQ(s.total_bytes, 2080u);
  EXPECT_EQ(s.unique_bytes, 2080u - 512);  // the tie spans two shards
  std::ofstream(dir + "/model.safetensors.index.json")
      << R"({"weight_map": {"missing.weight": "model-00001-of-00002.safetensors"}})";
  EXPECT_THROW(read_weight_file(dir), InputError);
  std::filesystem::remove_all(dir);
}

// Every truncation, and headers that lie: one InputError each.
TEST(Safetensors, DamagedFilesAreOneLineErrors) {
  const std::string good = write_safetensors(small_model());
  for (size_t n = 0; n < good.size(); n += 7) {
    const std::string path = save("cut.safetensors", good.substr(0, n));
    try {
      read_safetensors(path);
      ADD_FAILURE() << "a file cut at " << n << " bytes was read";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    }
    std::remove(path.c_str());
  }
  auto header = [](const std::string& json, size_t data) {
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
    return out + json + std::string(data, 'x');
  };
  const std::vector<std::pair<std::string, std::string>> lies = {
      {header(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 8), "outside the 8 data bytes"},
      {header(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 12]}})", 12), "12 bytes of data for 4 F32"},
      {header(R"({"a": {"dtype": "Q9", "shape": [4], "data_offsets": [0, 4]}})", 4), "unknown dtype 'Q9'"},
      {header(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                  "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}})",
              6),
       "overlapping"},
      {header(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}})", 9), "5 bytes after the last tensor"},
      {header(R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296, 16], "data_offsets": [0, 4]}})", 4),
       "shape overflows"},
      {header(R"([1, 2])", 0), "not a JSON object"},
      {std::string("\xff\xff\xff\xff\xff\xff\xff\x7f{}", 10), "does not fit"},
  };
  for (const auto& [bytes, message] : lies) {
    const std::string path = save("lie.safetensors", bytes);
    try {
      read_safetensors(path);
      ADD_FAILURE() << "read: " << message;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
    std::remove(path.c_str());
  }
}

}  // namespace
}  // namespace gpumem::weights
