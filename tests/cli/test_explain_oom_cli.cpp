// `gpumem explain-oom` as users run it: a pasted message on stdin or a log file.
#include <cstdio>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"

namespace {

using gpumem::test::CliRun;
using gpumem::test::run;

std::string temp_file(const std::string& name, const std::string& text) {
  const std::string path = testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(CliExplainOom, ALogFileGetsTheDiagnosisAndTheFigures) {
  const std::string log = temp_file(
      "oom.log",
      "Traceback (most recent call last):\n  File \"train.py\", line 42, in <module>\n    loss.backward()\n"
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 40.00 GiB. GPU 0 has a total capacity of "
      "79.15 GiB of which 30.00 GiB is free. Of the allocated memory 48.00 GiB is allocated by PyTorch, and 1.00 GiB "
      "is reserved by PyTorch but unallocated.\n");
  const CliRun r = run("explain-oom " + log + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["diagnosis"], "one huge request");
  EXPECT_EQ(doc["requested_bytes"], 40ull << 30);
  EXPECT_EQ(doc["reserved_unallocated_bytes"], 1ull << 30);
  EXPECT_EQ(doc["reserved_bytes"], 49ull << 30);
  EXPECT_TRUE(doc["process_bytes"].is_null());
  EXPECT_FALSE(doc["advice"].empty());
  const CliRun text = run("explain-oom " + log);
  EXPECT_EQ(text.out.rfind("Diagnosis   one huge request\n", 0), 0u) << text.out;
  std::remove(log.c_str());
}

TEST(CliExplainOom, WithoutAMessageItIsOneLineAndExit2) {
  const std::string log = temp_file("no_oom.log", "RuntimeError: shape mismatch\n");
  const CliRun r = run("explain-oom " + log);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no PyTorch or CUDA out-of-memory message"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  EXPECT_EQ(run("explain-oom /nonexistent.log").code, 2);
  std::remove(log.c_str());
}

}  // namespace
