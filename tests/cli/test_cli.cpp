// The gpumem binary as users run it: exit codes, one-line errors, JSON.
#include <array>
#include <cstdio>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/onnx_builder.h"
#include "test_paths.h"

namespace {

struct CliRun {
  int code = -1;
  std::string out;
  std::string err;
};

CliRun run(const std::string& args) {
  // ctest runs tests in parallel processes: one stderr file per process.
  const std::string err_file = testing::TempDir() + "gpumem_cli_stderr_" + std::to_string(getpid()) + ".txt";
  const std::string cmd = std::string(GPUMEM_CLI_PATH) + " " + args + " 2>" + err_file;
  CliRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (FILE* e = fopen(err_file.c_str(), "r")) {
    while ((n = fread(buf.data(), 1, buf.size(), e)) > 0) r.err.append(buf.data(), n);
    fclose(e);
  }
  return r;
}

std::string model(const std::string& name) { return gpumem::test::model_path(name).string(); }

TEST(Cli, InspectPrintsAReport) {
  const CliRun r = run("inspect " + model("mobilenet_v2"));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("peak live"), std::string::npos);
  EXPECT_TRUE(r.err.empty()) << r.err;
}

TEST(Cli, InspectJsonIsOneDocument) {
  const CliRun r = run("inspect " + model("bert_base") + " --json --top 3 --batch 2 --dtype fp16");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["activations"]["largest"].size(), 3u);
  // BERT's peak of 5,111,808 bytes at batch 1 in fp32: twice the batch, half the bytes.
  EXPECT_EQ(doc["activations"]["peak_live_bytes"], 5111808);
  EXPECT_EQ(doc["weights"]["by_dtype"][0]["dtype"], "int64");
}

TEST(Cli, MissingFileIsOneLineAndExitCode2) {
  const CliRun r = run("inspect /nonexistent.onnx");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "gpumem: error: /nonexistent.onnx: no such file\n");
  EXPECT_TRUE(r.out.empty());
}

TEST(Cli, NotOnnxIsOneLineAndExitCode2) {
  const std::string readme = (gpumem::test::source_dir() / "CMakeLists.txt").string();
  const CliRun r = run("inspect " + readme);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(readme + ": not "), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(Cli, DimFlagsBindSymbolsAndComeBeforeOrAfterTheModel) {
  gpumem::test::OnnxBuilder b;
  b.input("tokens", {"batch", "seq", 64});
  b.node("Relu", {"tokens"}, {"y"});
  b.output("y");
  const std::string path = testing::TempDir() + "gpumem_cli_symbolic_" + std::to_string(getpid()) + ".onnx";
  {
    std::ofstream out(path, std::ios::binary);
    out << b.bytes();
  }
  CliRun r = run("inspect --json " + path);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["activations"]["unknown_shape_tensors"], 2);
  EXPECT_EQ(nlohmann::json::parse(r.out)["lower_bound"], true);

  r = run("inspect --dim batch=2 --dim seq=10 " + path + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["activations"]["total_bytes"], 2 * (2 * 10 * 64 * 4));

  r = run("inspect " + path + " --dim batch=2,seq=10 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["activations"]["peak_live_bytes"], 2 * (2 * 10 * 64 * 4));

  r = run("inspect " + path + " --dim sequence=10");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no dimension named 'sequence' (its symbolic dimensions: batch, seq)"), std::string::npos)
      << r.err;
  std::remove(path.c_str());
}

TEST(Cli, BadFlagsAreRejected) {
  EXPECT_EQ(run("inspect " + model("resnet50") + " --dtype fp17").code, 2);
  EXPECT_EQ(run("inspect " + model("resnet50") + " --batch 0").code, 2);
  EXPECT_EQ(run("inspect " + model("resnet50") + " --dim N").code, 2);
  EXPECT_EQ(run("inspect").code, 2);
  EXPECT_EQ(run("frobnicate").code, 2);
}

}  // namespace
