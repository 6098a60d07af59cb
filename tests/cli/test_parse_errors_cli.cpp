// Mistakes on the command line, as users make them: every one ends in one
// line of gpumem's own format, exit code 2, and a suggestion where one is
// obvious.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"
#include "test_paths.h"

namespace {

using gpumem::test::CliRun;
using gpumem::test::run;

std::string model(const std::string& name) { return gpumem::test::model_path(name).string(); }
std::string trace(const std::string& name) { return std::string(GPUMEM_SOURCE_DIR) + "/tests/data/traces/" + name; }

// One line on stderr, nothing on stdout, exit 2: returns that line.
std::string one_line_error(const std::string& args) {
  const CliRun r = run(args);
  EXPECT_EQ(r.code, 2) << args;
  EXPECT_EQ(r.out, "") << args;
  EXPECT_EQ(r.err.rfind("gpumem: error: ", 0), 0u) << args << "\n" << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << args << "\n" << r.err;
  return r.err;
}

TEST(CliParseErrors, MisspeltCommandsGetTheRightOne) {
  EXPECT_EQ(one_line_error("trace stat " + trace("resnet18_train.json")),
            "gpumem: error: trace: unknown command 'stat' (commands: stats, convert, plan); did you mean `gpumem trace "
            "stats`?\n");
  EXPECT_EQ(one_line_error("stats " + trace("resnet18_train.json")),
            "gpumem: error: unknown command 'stats' (commands: inspect, plan, trace, replay, train, fit, weights, "
            "quantize, llm, finetune, explain-oom, serve-sim, exporter, report); did you mean `gpumem trace stats`?\n");
  EXPECT_NE(one_line_error("inpsect x.onnx").find("did you mean `gpumem inspect`?"), std::string::npos);
  EXPECT_EQ(one_line_error("frobnicate").find("did you mean"), std::string::npos);
  EXPECT_EQ(one_line_error(""),
            "gpumem: error: give a command: inspect, plan, trace, replay, train, fit, weights, quantize, llm, "
            "finetune, explain-oom, serve-sim, exporter, report (see "
            "`gpumem --help`)\n");
}

TEST(CliParseErrors, UnknownFlagsAreNamedWithTheClosestOne) {
  EXPECT_EQ(one_line_error("inspect " + model("resnet50") + " --bach 2"),
            "gpumem: error: inspect: unknown flag --bach; did you mean --batch?\n");
  EXPECT_EQ(one_line_error("replay " + trace("resnet18_train.json") + " --polcy bfc"),
            "gpumem: error: replay: unknown flag --polcy; did you mean --policy?\n");
  EXPECT_EQ(one_line_error("inspect " + model("resnet50") + " --frobnicate"),
            "gpumem: error: inspect: unknown flag --frobnicate\n");
}

TEST(CliParseErrors, NumbersAreCheckedInWords) {
  EXPECT_EQ(one_line_error("inspect " + model("resnet50") + " --batch 0"),
            "gpumem: error: inspect: --batch: '0' is not a positive integer\n");
  EXPECT_EQ(one_line_error("inspect " + model("resnet50") + " --top 1.5"),
            "gpumem: error: inspect: --top: '1.5' is not an integer >= 0\n");
  EXPECT_EQ(one_line_error("plan " + model("resnet50") + " --time-limit -1"),
            "gpumem: error: plan: --time-limit: '-1' is not a number >= 0\n");
  EXPECT_EQ(one_line_error("trace stats " + trace("resnet18_train.json") + " --device gpu0"),
            "gpumem: error: trace stats: --device: 'gpu0' is not an integer\n");
}

// --dim and --policy take several values the same way: commas or a repeated
// flag; a space ends the list, so the list never swallows the input file.
TEST(CliParseErrors, ListFlagsBehaveAlike) {
  EXPECT_EQ(one_line_error("inspect " + model("resnet50") + " --dim a=1 b=2"),
            "gpumem: error: inspect: unexpected argument 'b=2': to give --dim several values, separate them with "
            "commas (--dim a=1,b=2) or repeat the flag\n");
  EXPECT_EQ(one_line_error("replay " + trace("resnet18_train.json") + " --policy gpumem pytorch"),
            "gpumem: error: replay: unexpected argument 'pytorch': to give --policy several values, separate them "
            "with commas (--policy gpumem,pytorch) or repeat the flag\n");
  for (const char* policies : {"--policy gpumem,bfc", "--policy gpumem --policy bfc"}) {
    const CliRun r = run("replay " + trace("resnet18_train.json") + " --time-limit 0 --json " + policies);
    ASSERT_EQ(r.code, 0) << policies << ": " << r.err;
    // The policies replayed (the JSON also names the one the trace was
    // recorded under, pytorch, for its advice).
    const auto doc = nlohmann::json::parse(r.out);
    std::string names;
    for (const auto& p : doc["policies"]) names += p["name"].get<std::string>() + " ";
    EXPECT_EQ(names, "gpumem bfc ") << policies;
  }
  // The help shows the list's shape.
  const CliRun help = run("inspect --help");
  EXPECT_NE(help.out.find("NAME=VALUE[,...]"), std::string::npos) << help.out;
}

TEST(CliParseErrors, HelpAndVersionStillExitZero) {
  EXPECT_EQ(run("--help").code, 0);
  EXPECT_EQ(run("trace stats --help").code, 0);
  const CliRun version = run("--version");
  EXPECT_EQ(version.code, 0);
  EXPECT_NE(version.out.find("gpumem"), std::string::npos);
}

}  // namespace
