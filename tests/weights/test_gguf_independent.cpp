// GGUF files from gpumem's writer read by an independent reader, Hugging
// Face's @huggingface/gguf (through tools/gguf_check.js), which must find
// the same tensors, types, shapes, offsets and metadata as gpumem's. Skips
// when node or the package is missing (CI has no network): set
// GPUMEM_NODE_MODULES to a folder where `npm install @huggingface/gguf` ran.
#include <sys/wait.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gpumem/weights/gguf.h"
#include "test_paths.h"
#include "weights/gguf_fixtures.h"

namespace gpumem::weights::test_gguf {
namespace {

// Runs tools/gguf_check.js (Hugging Face's @huggingface/gguf) on a file;
// skips the test when node or the package is missing.
nlohmann::json independent_reading(const std::string& path) {
  if (std::system("command -v node >/dev/null 2>&1") != 0) return nullptr;
  const std::string err = temp_path("node_stderr.txt");
  const std::string cmd =
      "node " + (test::source_dir() / "tools" / "gguf_check.js").string() + " '" + path + "' 2>'" + err + "'";
  std::FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return nullptr;
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int status = ::pclose(pipe);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) return nlohmann::json(test::read_file_bytes(err));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << test::read_file_bytes(err);
  return nlohmann::json::parse(out, nullptr, false);
}

// A JSON scalar as gpumem's reader prints it; floats at float32's precision,
// which JavaScript widens to double.
std::string text_of(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return fmt::format("{}", static_cast<float>(v.get<double>()));
  return v.dump();
}

void expect_independent_reader_agrees(const std::string& path) {
  const nlohmann::json theirs = independent_reading(path);
  if (theirs.is_null()) GTEST_SKIP() << "node is not installed";
  if (theirs.is_string()) GTEST_SKIP() << theirs.get<std::string>();
  ASSERT_TRUE(theirs.is_object());
  const WeightFile ours = read_gguf(path);
  EXPECT_EQ(theirs["version"], 3);
  ASSERT_EQ(theirs["tensors"].size(), ours.tensors.size());
  const uint64_t data = std::stoull(theirs["tensor_data_offset"].get<std::string>());
  for (size_t i = 0; i < ours.tensors.size(); ++i) {
    const nlohmann::json& t = theirs["tensors"][i];
    const TensorEntry& e = ours.tensors[i];
    EXPECT_EQ(t["name"], e.name);
    EXPECT_EQ(t["type"], ggml_type_named(e.dtype)->id) << e.name;
    std::vector<uint64_t> shape;
    for (const auto& d : t["shape"]) shape.push_back(std::stoull(d.get<std::string>()));
    EXPECT_EQ(shape, e.shape) << e.name;
    EXPECT_EQ(data + std::stoull(t["offset"].get<std::string>()), e.offset) << e.name;
  }
  ASSERT_EQ(theirs["metadata"].size(), ours.metadata.size());
  for (const auto& [key, value] : theirs["metadata"].items()) {
    const std::string& mine = ours.metadata.at(key);
    if (!value.is_array()) {
      EXPECT_EQ(text_of(value), mine) << key;
    } else if (value.size() > 8) {
      EXPECT_EQ(mine.rfind("[" + std::to_string(value.size()) + " ", 0), 0u) << key << ": " << mine;
    } else {
      std::string shown = "[";
      for (const auto& v : value) shown += (shown.size() > 1 ? ", " : "") + (v.is_string() ? v.dump() : text_of(v));
      EXPECT_EQ(shown + "]", mine) << key;
    }
  }
}

TEST(Gguf, IndependentReaderAgreesOnASmallFile) {
  expect_independent_reader_agrees(write_temp("independent.gguf", write_gguf(small_model())));
}

TEST(Gguf, IndependentReaderAgreesOnASparseLlama3_8B) {
  const std::string path = temp_path("independent_llama3_8b.gguf");
  write_gguf_sparse(path, llama3_8b());
  expect_independent_reader_agrees(path);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace gpumem::weights::test_gguf
