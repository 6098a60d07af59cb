// safetensors files from gpumem's writer read by an independent reader,
// Hugging Face's @huggingface/hub parser (through tools/safetensors_check.js),
// which must find the same tensors, dtypes, shapes and offsets as gpumem's
// reader. Skips when node or the package is missing (CI has no network): set
// GPUMEM_NODE_MODULES to a folder where `npm install @huggingface/hub` ran.
#include <sys/wait.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gpumem/weights/weight_file.h"
#include "test_paths.h"

namespace gpumem::weights {
namespace {

namespace fs = std::filesystem;

// tools/safetensors_check.js on DIR/FILE; a string when it skipped.
nlohmann::json independent_reading(const fs::path& dir, const std::string& file) {
  if (std::system("command -v node >/dev/null 2>&1") != 0) return "node is not installed";
  const std::string err = (dir / "node_stderr.txt").string();
  const std::string cmd = "node " + (test::source_dir() / "tools" / "safetensors_check.js").string() + " '" +
                          dir.string() + "' '" + file + "' 2>'" + err + "'";
  std::FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return "popen failed";
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int status = ::pclose(pipe);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) return test::read_file_bytes(err);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << test::read_file_bytes(err);
  return nlohmann::json::parse(out, nullptr, false);
}

// Where a file's data starts: after the 8-byte length and the header.
uint64_t data_start(const std::string& path) {
  const std::string bytes = test::read_file_bytes(path);
  uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  return 8 + header;
}

void expect_agreement(const fs::path& dir, const std::string& file, const WeightFile& ours) {
  const nlohmann::json theirs = independent_reading(dir, file);
  if (theirs.is_string()) GTEST_SKIP() << theirs.get<std::string>();
  ASSERT_TRUE(theirs.is_object());
  ASSERT_EQ(theirs["tensors"].size(), ours.tensors.size());
  for (const TensorEntry& e : ours.tensors) {
    ASSERT_TRUE(theirs["tensors"].contains(e.name)) << e.name;
    const nlohmann::json& t = theirs["tensors"][e.name];
    EXPECT_EQ(t["dtype"], e.dtype) << e.name;
    EXPECT_EQ(t["shape"].get<std::vector<uint64_t>>(), e.shape) << e.name;
    EXPECT_EQ((dir / t["file"].get<std::string>()).string(), fs::path(e.file).string()) << e.name;
    const uint64_t start = data_start(e.file);
    EXPECT_EQ(t["data_offsets"][0].get<uint64_t>() + start, e.offset) << e.name;
    EXPECT_EQ(t["data_offsets"][1].get<uint64_t>() - t["data_offsets"][0].get<uint64_t>(), e.bytes) << e.name;
  }
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::path(testing::TempDir()) / ("gpumem_st_independent_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::vector<TensorData> some_tensors(const std::string& prefix) {
  return {{prefix + "embed.weight", "BF16", {10, 6}, std::string(10 * 6 * 2, '\x01')},
          {prefix + "norm.weight", "F32", {6}, std::string(6 * 4, '\x02')},
          {prefix + "mlp.weight", "F16", {6, 3, 2}, std::string(6 * 3 * 2 * 2, '\x03')},
          {prefix + "ids", "I64", {5}, std::string(5 * 8, '\x04')},
          {prefix + "mask", "BOOL", {7}, std::string(7, '\x01')}};
}

TEST(SafetensorsIndependent, ASingleFileReadsTheSame) {
  const fs::path dir = fresh_dir("single");
  const fs::path file = dir / "model.safetensors";
  std::ofstream(file, std::ios::binary) << write_safetensors(some_tensors("model."), {{"format", "pt"}});
  expect_agreement(dir, "model.safetensors", read_safetensors(file.string()));
}

TEST(SafetensorsIndependent, AShardedCheckpointReadsTheSame) {
  const fs::path dir = fresh_dir("sharded");
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  for (int shard = 1; shard <= 2; ++shard) {
    const std::string name = "model-0000" + std::to_string(shard) + "-of-00002.safetensors";
    const auto tensors = some_tensors("model.layers." + std::to_string(shard) + ".");
    std::ofstream(dir / name, std::ios::binary) << write_safetensors(tensors);
    for (const auto& t : tensors) index["weight_map"][t.name] = name;
  }
  std::ofstream(dir / "model.safetensors.index.json") << index.dump(2);
  expect_agreement(dir, "model.safetensors.index.json",
                   read_safetensors_index((dir / "model.safetensors.index.json").string()));
}

}  // namespace
}  // namespace gpumem::weights
