// `gpumem exporter` as a user runs it: --once prints metrics Prometheus'
// own linter accepts, and bad flags are one-line errors.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "cli/cli_runner.h"
#include "test_paths.h"

namespace gpumem::test {
namespace {

TEST(CliExporter, OnceWithASimulatedGpuPrintsTheChain) {
  const CliRun r = run("exporter --once --interval 300ms --speed 100 --simulate " + trace_path("resnet18_train.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("# TYPE gpumem_allocator_reserved_bytes gauge"), std::string::npos);
  EXPECT_NE(r.out.find("DCGM_FI_DEV_FB_USED{gpu=\"0\""), std::string::npos);
  EXPECT_NE(r.out.find("gpumem_gpu_info{"), std::string::npos);
  EXPECT_NE(r.out.find("model_name=\"gpumem simulated GPU\""), std::string::npos);
  EXPECT_NE(r.out.find("gpumem_exporter_gpu_source_up{"), std::string::npos);
}

TEST(CliExporter, PromtoolFindsNoProblemInTheOutput) {
  if (std::system("promtool --version >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool is not installed (scripts/install-deps.sh installs Debian's prometheus package)";
  }
  const std::string out = write_temp("exporter_metrics.txt", "");
  const CliRun r =
      run("exporter --once --interval 300ms --speed 100 --simulate " + trace_path("resnet18_train.json") + " >" + out);
  ASSERT_EQ(r.code, 0) << r.err;
  std::string said;
  FILE* lint = popen(("promtool check metrics <" + out + " 2>&1").c_str(), "r");
  ASSERT_NE(lint, nullptr);
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, lint)) > 0;) said.append(buf, n);
  EXPECT_EQ(pclose(lint), 0) << said;
  EXPECT_EQ(said, "");
  EXPECT_NE(read_file_bytes(out).find("gpumem_allocator_fragmentation_ratio{"), std::string::npos);
}

TEST(CliExporter, BadFlagsAreOneLineErrors) {
  CliRun r = run("exporter --once --interval 5x");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "gpumem: error: --interval 5x: expected a duration of at least 10ms, such as 1s or 500ms\n");
  r = run("exporter --once --simulate /nonexistent.json");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  EXPECT_NE(r.err.find("/nonexistent.json"), std::string::npos) << r.err;
  r = run("exporter --once --simulate " + trace_path("resnet18_train.json") + " --gpu lots");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--gpu"), std::string::npos) << r.err;
  r = run("exporter --once --simulate " + trace_path("resnet18_train.json") + " --config round_bytes:3");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("round_bytes"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gpumem::test
