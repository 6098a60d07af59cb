// `gpumem weights` as users run it on the files they have.
#include <unistd.h>
#include <cstdio>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"
#include "gpumem/weights/weight_file.h"
#include "test_paths.h"

namespace {

using gpumem::test::CliRun;
using gpumem::test::run;

TEST(CliWeights, ASafetensorsFileItsTotalsAndItsTiedTensors) {
  const std::string path = testing::TempDir() + "gpumem_weights_" + std::to_string(getpid()) + ".safetensors";
  const std::string embedding(64 * 16 * 2, '\x11');
  std::ofstream(path, std::ios::binary) << gpumem::weights::write_safetensors(
      {{"model.embed_tokens.weight", "BF16", {64, 16}, embedding},
       {"model.layers.0.self_attn.q_proj.weight", "BF16", {16, 16}, std::string(16 * 16 * 2, '\x22')},
       {"lm_head.weight", "BF16", {64, 16}, embedding}});
  // By default the header alone: no tensor data read, no duplicates found.
  const CliRun header = run("weights " + path + " --json");
  ASSERT_EQ(header.code, 0) << header.err;
  EXPECT_FALSE(nlohmann::json::parse(header.out)["duplicates_checked"].get<bool>());
  EXPECT_EQ(nlohmann::json::parse(header.out)["unique_bytes"], 2 * 2048 + 512);
  const CliRun old = run("weights " + path + " --no-duplicates --json");
  EXPECT_EQ(old.out, header.out);
  EXPECT_NE(old.err.find("--no-duplicates is now the default"), std::string::npos) << old.err;

  const CliRun r = run("weights " + path + " --duplicates --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_TRUE(doc["duplicates_checked"].get<bool>());
  EXPECT_EQ(doc["format"], "safetensors");
  EXPECT_EQ(doc["tensors"].size(), 3u);
  EXPECT_EQ(doc["total_bytes"], 2 * 2048 + 512);
  EXPECT_EQ(doc["unique_bytes"], 2048 + 512);
  EXPECT_EQ(doc["by_dtype"][0]["dtype"], "BF16");
  EXPECT_EQ(doc["duplicates"][0]["tensors"].size(), 2u);
  const CliRun text = run("weights " + path + " --duplicates");
  EXPECT_NE(text.out.find("Unique"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("Duplicate"), std::string::npos) << text.out;
  std::remove(path.c_str());
}

TEST(CliWeights, AnOnnxModelsInitializers) {
  const CliRun r = run("weights " + gpumem::test::model_path("resnet50").string() + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["format"], "onnx");
  // resnet50's initializers: 25,507,944 float32 values (tools/export_models.py counted them).
  EXPECT_EQ(doc["total_bytes"], 25507944u * 4);
  EXPECT_FALSE(doc["duplicates_checked"].get<bool>());  // graph-only: no data to compare
}

TEST(CliWeights, NotAWeightFileIsOneLine) {
  const std::string path = testing::TempDir() + "gpumem_weights_bad_" + std::to_string(getpid()) + ".bin";
  std::ofstream(path) << "hello, world";
  const CliRun r = run("weights " + path);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("not a weight file gpumem reads"), std::string::npos) << r.err;
  std::remove(path.c_str());
}

}  // namespace
