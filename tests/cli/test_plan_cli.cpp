// `gpumem plan` as users run it: gaps, which flags apply to which input,
// when a capacity stops the search, and what the report says about why it
// stopped.
#include <algorithm>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"
#include "gpumem/plan/csv.h"
#include "gpumem/plan/solver.h"
#include "plan/plan_instances.h"

namespace gpumem::plan {
namespace {

using gpumem::test::CliRun;
using gpumem::test::run;
using gpumem::test::write_temp;

// A guillotine cut of a `height`-byte rectangle (so the optimum is
// `height`) on which the heuristics leave a gap: only a search closes it.
// With a spine, one more byte lives all the time, which makes the whole
// problem one time partition (optimum: height + 1).
Problem cut_the_heuristics_miss(int pieces, int64_t height, bool spine = false) {
  for (uint64_t seed = 1;; ++seed) {
    std::mt19937_64 rng(seed);
    Problem p = test::rectangle_cut(rng, pieces, 400, height);
    if (spine) p.buffers.push_back({"spine", 0, 400, 1, 1, {}});
    if (best_heuristic(p).plan.arena > height + (spine ? 1 : 0)) return p;
  }
}

std::string csv_of(const Problem& p) { return write_csv(p, {}); }

TEST(CliPlan, GapsArePlannedWrittenAndValidated) {
  const std::string in = write_temp("gaps.csv", "id,lower,upper,size,gaps\na,0,10,4,2-8\nb,3,6,4,\n");
  const std::string out = testing::TempDir() + std::to_string(getpid()) + "_gaps_plan.csv";
  CliRun r = run("plan " + in + " --json -o " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["arena_bytes"], 4);
  EXPECT_EQ(doc["optimal"], true);
  EXPECT_EQ(doc["buffers"][0]["gaps"], nlohmann::json::parse(R"([{"lower":2,"upper":8,"window":null}])"));
  EXPECT_FALSE(doc["buffers"][1].contains("gaps"));
  r = run("plan --validate " + out);
  EXPECT_EQ(r.code, 0) << r.err;
  // Both at offset 0: valid only because of the gap.
  const std::string both_at_zero =
      write_temp("gaps_zero.csv", "id,lower,upper,size,gaps,offset\na,0,10,4,2-8,0\nb,3,6,4,,0\n");
  r = run("plan --validate " + both_at_zero);
  EXPECT_EQ(r.code, 0) << r.err;
  const std::string windowed =
      write_temp("gaps_window.csv", "id,lower,upper,size,gaps,offset\na,0,10,4,2-8@2:3,0\nb,3,6,4,,0\n");
  r = run("plan --validate " + windowed);
  EXPECT_EQ(r.code, 4);
  EXPECT_NE(r.err.find("at time 3, outside their gaps"), std::string::npos) << r.err;
}

TEST(CliPlan, ModelFlagsOnACsvAreErrors) {
  const std::string in = write_temp("flags.csv", "id,lower,upper,size\na,0,3,4\n");
  for (const std::string flag :
       {"--batch 2", "--dim N=3", "--dtype fp16", "--weights-dtype fp16", "--activations-dtype bf16", "--no-inplace"}) {
    const CliRun r = run("plan " + in + " " + flag);
    EXPECT_EQ(r.code, 2) << flag;
    EXPECT_TRUE(r.out.empty()) << flag;
    EXPECT_NE(r.err.find(flag.substr(0, flag.find(' ')) + " does not apply to a CSV of buffers (" + in + ")"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

TEST(CliPlan, ACapacityStopsAtTheFirstPlanThatFitsUnlessMinimizeIsGiven) {
  const Problem p = cut_the_heuristics_miss(40, 256);
  const int64_t heuristic = best_heuristic(p).plan.arena;
  const std::string in = write_temp("fits.csv", csv_of(p));
  CliRun r = run("plan " + in + " --json --gpu " + std::to_string(heuristic) + "B");
  ASSERT_EQ(r.code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["arena_bytes"], heuristic);
  EXPECT_EQ(doc["stop_reason"], "fits");
  EXPECT_EQ(doc["optimal"], false);
  EXPECT_EQ(doc["search_nodes"], 0);
  EXPECT_EQ(doc["limit_reached"], false);
  r = run("plan " + in + " --gpu " + std::to_string(heuristic) + "B");
  EXPECT_NE(r.out.find("stopped: the plan fits the capacity (--minimize"), std::string::npos) << r.out;

  r = run("plan " + in + " --json --minimize --gpu " + std::to_string(heuristic) + "B");
  ASSERT_EQ(r.code, 0) << r.err;
  doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["arena_bytes"], 256);
  EXPECT_EQ(doc["optimal"], true);
  EXPECT_EQ(doc["stop_reason"], "optimal");

  // A capacity below the heuristics' plan: the search runs until one fits.
  r = run("plan " + in + " --json --gpu 256B");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["arena_bytes"], 256);
  // Below the lower bound: nothing fits, and the report says it is proven.
  r = run("plan " + in + " --gpu 255B");
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.out.find("no plan fits (proven)"), std::string::npos) << r.out;
}

TEST(CliPlan, TheReportSaysWhyTheSearchStopped) {
  const std::string in = write_temp("stop.csv", csv_of(cut_the_heuristics_miss(40, 256)));
  CliRun r = run("plan " + in + " --time-limit 0");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("stopped: the time limit ran out"), std::string::npos) << r.out;
  r = run("plan " + in + " --solver heuristic --json");
  EXPECT_EQ(nlohmann::json::parse(r.out)["stop_reason"], "heuristic_only");
  r = run("plan " + in + " --solver heuristic");
  EXPECT_NE(r.out.find("stopped: --solver heuristic runs no exact search"), std::string::npos) << r.out;
}

// Over 2,000 buffers in one time partition `auto` keeps the heuristics'
// plan and says so; `exact` searches it.
TEST(CliPlan, SolverExactSearchesPartitionsAutoLeavesToTheHeuristics) {
  const std::string in = write_temp("large.csv", csv_of(cut_the_heuristics_miss(2100, 4096, true)));
  CliRun r = run("plan " + in + " --json --time-limit 1");
  ASSERT_EQ(r.code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["stop_reason"], "too_large");
  EXPECT_EQ(doc["search_nodes"], 0);
  r = run("plan " + in + " --time-limit 1");
  EXPECT_NE(r.out.find("over 2,000 buffers"), std::string::npos) << r.out;
  r = run("plan " + in + " --json --time-limit 1 --solver exact");
  ASSERT_EQ(r.code, 0) << r.err;
  doc = nlohmann::json::parse(r.out);
  EXPECT_NE(doc["stop_reason"], "too_large");
  EXPECT_GT(doc["search_nodes"].get<int64_t>(), 0);
}

// Issue 10, item 6: "80GB" is taken at its word, with the binary figure
// and the GiB advice on stderr; no note for binary units; 0 is no capacity.
TEST(CliPlan, ADecimalCapacityIsTakenWithANote) {
  const std::string in = write_temp("capacity_units.csv", "id,lower,upper,size\na,0,3,4\n");
  CliRun r = run("plan " + in + " --json --gpu 80GB");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["capacity_bytes"], 80'000'000'000);
  EXPECT_NE(r.err.find("note: --gpu 80GB is 80,000,000,000 bytes (74.51 GiB); a GPU sold as \"80GB\" has 80 GiB"),
            std::string::npos)
      << r.err;
  r = run("plan " + in + " --json --gpu 80GiB");
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(r.err.empty()) << r.err;
  for (const std::string command :
       {"plan " + in, "replay " + std::string(GPUMEM_SOURCE_DIR) + "/tests/data/traces/resnet18_train.json"}) {
    r = run(command + " --gpu 0");
    EXPECT_EQ(r.code, 2) << command;
    EXPECT_NE(r.err.find("--gpu '0': not a positive byte count"), std::string::npos) << r.err;
  }
}

// What `trace convert --to csv -o NAME.csv.gz` writes, `plan` reads.
TEST(CliPlan, ReadsTheGzipCsvThatTraceConvertWrites) {
  const std::string trace = std::string(GPUMEM_SOURCE_DIR) + "/tests/data/traces/resnet18_train.json";
  const std::string gz = testing::TempDir() + std::to_string(getpid()) + "_lifetimes.csv.gz";
  const std::string plain = testing::TempDir() + std::to_string(getpid()) + "_lifetimes.csv";
  ASSERT_EQ(run("trace convert " + trace + " --to csv -o " + gz).code, 0);
  ASSERT_EQ(run("trace convert " + trace + " --to csv -o " + plain).code, 0);
  CliRun from_gz = run("plan " + gz + " --json --solver heuristic");
  ASSERT_EQ(from_gz.code, 0) << from_gz.err;
  const CliRun from_plain = run("plan " + plain + " --json --solver heuristic");
  auto a = nlohmann::json::parse(from_gz.out), b = nlohmann::json::parse(from_plain.out);
  EXPECT_EQ(a["kind"], "csv");
  EXPECT_EQ(a["buffers"], b["buffers"]);
  EXPECT_EQ(a["arena_bytes"], b["arena_bytes"]);
  // Cut short: one line naming the file, exit 2.
  std::ifstream in(gz, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string cut = write_temp("cut.csv.gz", bytes.substr(0, bytes.size() / 2));
  from_gz = run("plan " + cut);
  EXPECT_EQ(from_gz.code, 2);
  EXPECT_NE(from_gz.err.find(cut + ": byte "), std::string::npos) << from_gz.err;
  EXPECT_EQ(std::count(from_gz.err.begin(), from_gz.err.end(), '\n'), 1) << from_gz.err;
}

}  // namespace
}  // namespace gpumem::plan
