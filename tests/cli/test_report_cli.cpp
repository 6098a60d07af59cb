// `gpumem report` and --html as a user runs them: a page appears where
// asked, stdout stays the command's own output, and bad input writes
// nothing.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cli/cli_runner.h"
#include "test_paths.h"

namespace gpumem::test {
namespace {

std::string temp_html(const std::string& name) {
  const std::string path = testing::TempDir() + std::to_string(getpid()) + "_" + name + ".html";
  std::filesystem::remove(path);
  return path;
}

TEST(CliReport, ATraceGetsAPageAndSaysWhere) {
  const std::string out = temp_html("trace");
  const CliRun r = run("report " + trace_path("resnet18_train.json") + " -o " + out + " --time-limit 1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.rfind("gpumem: wrote " + out + " (", 0), 0u) << r.err;
  const std::string page = read_file_bytes(out);
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(page.find("data-series=\"rmm-pool reserved\""), std::string::npos);
  EXPECT_NE(page.find("<h2>The optimal arena</h2>"), std::string::npos);
}

TEST(CliReport, AModelGetsItsPlan) {
  const std::string out = temp_html("model");
  const CliRun r = run("report " + model_path("mobilenet_v2").string() + " -o " + out + " --time-limit 1");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string page = read_file_bytes(out);
  EXPECT_NE(page.find("<h2>The arena</h2>"), std::string::npos);
  EXPECT_NE(page.find("<h2>The largest activations</h2>"), std::string::npos);
}

TEST(CliReport, HtmlLeavesTheCommandsOwnOutputAlone) {
  const std::string out = temp_html("inspect");
  const std::string model = model_path("mobilenet_v2").string();
  const CliRun plain = run("inspect " + model);
  const CliRun with = run("inspect " + model + " --html " + out);
  ASSERT_EQ(with.code, 0) << with.err;
  EXPECT_EQ(with.out, plain.out);
  EXPECT_TRUE(std::filesystem::exists(out));
  const CliRun json = run("trace stats " + trace_path("resnet18_train.json") + " --json --html " + temp_html("stats"));
  ASSERT_EQ(json.code, 0) << json.err;
  EXPECT_EQ(json.out.front(), '{') << "stdout is still one JSON document";
}

TEST(CliReport, BadInputIsOneLineAndWritesNothing) {
  const std::string out = temp_html("bad");
  CliRun r = run("report /nonexistent/trace.json -o " + out);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  EXPECT_NE(r.err.find("/nonexistent/trace.json"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));
  r = run("report " + trace_path("mlp_no_memory.json") + " -o " + out);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no memory events"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));
  r = run("report " + trace_path("resnet18_train.json"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--output"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gpumem::test
