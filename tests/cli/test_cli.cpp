// The gpumem binary as users run it: exit codes, one-line errors, JSON.
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"
#include "model/onnx_builder.h"
#include "test_paths.h"

namespace {

using gpumem::test::CliRun;
using gpumem::test::run;
using gpumem::test::write_temp;

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
  // Unbound, there is nothing to size (issue 30): the symbols are named.
  CliRun r = run("inspect --json " + path);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("symbolic dimensions batch, seq are not bound"), std::string::npos) << r.err;

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

const char* kReadmeExample = "id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\nb3,0,9,4\nb4,9,21,4\nb5,0,21,4\n";

TEST(CliPlan, PlansACsvAndWritesAPlanThatValidates) {
  const std::string in = write_temp("example.csv", kReadmeExample);
  const std::string out = testing::TempDir() + std::to_string(getpid()) + "_plan_out.csv";
  CliRun r = run("plan " + in + " -o " + out + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["arena_bytes"], 12);
  EXPECT_EQ(doc["lower_bound_bytes"], 12);
  EXPECT_EQ(doc["optimal"], true);
  EXPECT_EQ(doc["gap_bytes"], 0);
  EXPECT_EQ(doc["buffers"].size(), 5u);
  r = run("plan --validate " + out);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("valid plan of 5 buffers"), std::string::npos) << r.out;
}

TEST(CliPlan, CapacityDecidesTheExitCode) {
  const std::string in = write_temp("cap.csv", kReadmeExample);
  EXPECT_EQ(run("plan " + in + " --gpu 12B").code, 0);
  const CliRun r = run("plan " + in + " --gpu 11B");
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.out.find("DOES NOT FIT"), std::string::npos) << r.out;
  EXPECT_EQ(run("plan " + in + " --gpu 1KiB --json").code, 0);
  EXPECT_EQ(run("plan " + in + " --gpu lots").code, 2);
}

TEST(CliPlan, ValidateNamesTheFirstCollidingPair) {
  const std::string plan = write_temp(
      "bad_plan.csv", "id,lower,upper,size,offset\nb1,0,3,4,0\nb2,3,9,4,0\nb3,0,9,4,2\nb4,9,21,4,0\nb5,0,21,4,8\n");
  const CliRun r = run("plan --validate " + plan);
  EXPECT_EQ(r.code, 4);
  EXPECT_NE(r.err.find("'b1'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("'b3'"), std::string::npos) << r.err;
}

TEST(CliPlan, BadCsvNamesTheLineAndWritesNothing) {
  const std::string in = write_temp("broken.csv", "id,lower,upper,size\nb1,0,3,4\nb2,5,3,4\n");
  const std::string out = testing::TempDir() + std::to_string(getpid()) + "_never_written.csv";
  std::remove(out.c_str());
  const CliRun r = run("plan " + in + " -o " + out);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(in + ":3:"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(std::ifstream(out).good());
}

TEST(CliPlan, PinnedOffsetsThatCollideOrMisalignAreErrors) {
  const std::string collide =
      write_temp("pinned.csv", "id,lower,upper,size,offset\na,0,10,8,0\nb,5,15,8,4\nc,0,20,4,\n");
  CliRun r = run("plan " + collide);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("'a'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("'b'"), std::string::npos) << r.err;
  const std::string misaligned = write_temp("misaligned.csv", "id,lower,upper,size,offset\na,0,10,8,4\nb,5,15,8,\n");
  r = run("plan " + misaligned + " --alignment 8");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("not a multiple of its alignment 8"), std::string::npos) << r.err;
  // Pinned where they do not collide: kept, and the rest planned around them.
  const std::string ok = write_temp("pinned_ok.csv", "id,lower,upper,size,offset\na,0,10,8,8\nb,5,15,8,\n");
  r = run("plan " + ok + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["buffers"][0]["offset"], 8);
  EXPECT_EQ(doc["arena_bytes"], 16);
}

TEST(CliPlan, PlansAModelsActivations) {
  const CliRun r = run("plan " + model("resnet50") + " --json --time-limit 2");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["kind"], "model");
  EXPECT_EQ(doc["naive_bytes"], 106393504);  // inspect's total: no reuse
  EXPECT_EQ(doc["arena_bytes"], doc["lower_bound_bytes"]);
  EXPECT_GT(doc["inplace_saved_bytes"].get<int64_t>(), 0);
  EXPECT_EQ(doc["arena_without_inplace_bytes"], 9633792);  // inspect's peak
}

}  // namespace

namespace {

std::string trace_file(const std::string& name) {
  return std::string(GPUMEM_SOURCE_DIR) + "/tests/data/traces/" + name;
}

// The largest "Total Allocated" the profiler itself wrote in a trace
// recorded from an empty device: the most its allocations held at once,
// known without replay or the planner.
std::int64_t profiler_peak(const std::string& trace) {
  const CliRun r = run("trace stats " + trace_file(trace) + " --json");
  EXPECT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["baseline_bytes"], 0) << trace << " was not recorded from an empty device";
  return doc["source_peak_allocated_bytes"].get<std::int64_t>();
}

TEST(Cli, TraceStatsJsonOnARealTrace) {
  const CliRun r = run("trace stats " + trace_file("resnet18_train.json") + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["schema_version"], 2);
  EXPECT_EQ(doc["format"], "chrome-trace");
  EXPECT_EQ(doc["peak_allocated_bytes"], doc["source_peak_allocated_bytes"]);
  EXPECT_GT(doc["never_freed"]["allocations"].get<int>(), 0);
}

TEST(Cli, ReplayJsonNamesWherePoliciesRunOut) {
  const CliRun all = run("replay " + trace_file("resnet18_train.json") + " --json --time-limit 1");
  ASSERT_EQ(all.code, 0) << all.err;
  const auto doc = nlohmann::json::parse(all.out);
  EXPECT_EQ(doc["policies"].size(), 6u);
  const std::int64_t peak = profiler_peak("resnet18_train.json");
  EXPECT_EQ(doc["traced_peak_bytes"], peak);
  EXPECT_EQ(doc["lower_bound_bytes"], peak);
  for (const auto& p : doc["policies"]) {
    EXPECT_GE(p["peak_reserved_bytes"].get<std::int64_t>(), doc["traced_peak_bytes"].get<std::int64_t>());
    EXPECT_TRUE(p["oom_at_event"].is_null());
  }
  const CliRun tight = run("replay " + trace_file("resnet18_train.json") +
                           " --json --time-limit 0 --policy gpumem --policy bfc --gpu 64MiB");
  ASSERT_EQ(tight.code, 3) << tight.err;  // every policy runs out, as `plan` when nothing fits
  const auto t = nlohmann::json::parse(tight.out);
  ASSERT_EQ(t["policies"].size(), 2u);
  for (const auto& p : t["policies"]) EXPECT_TRUE(p["oom_at_event"].is_number()) << p.dump();
  EXPECT_TRUE(t["optimal_arena_bytes"].is_null());
}

TEST(Cli, ReplayRejectsUnknownPoliciesAndBadFiles) {
  const CliRun policy = run("replay " + trace_file("resnet18_train.json") + " --policy tcmalloc");
  EXPECT_EQ(policy.code, 2);
  EXPECT_NE(policy.err.find("unknown policy 'tcmalloc'"), std::string::npos) << policy.err;
  const CliRun missing = run("replay /nonexistent/trace.json");
  EXPECT_EQ(missing.code, 2);
  const std::string junk = testing::TempDir() + "junk_trace.bin";
  std::ofstream(junk) << "this is not a trace\n";
  const CliRun bad = run("trace stats " + junk);
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("byte 0: not a trace gpumem reads"), std::string::npos) << bad.err;
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1);
}

TEST(Cli, ConvertedTraceIsAPlanningProblem) {
  const std::string csv = testing::TempDir() + "resnet18_lifetimes.csv";
  const CliRun convert = run("trace convert " + trace_file("resnet18_train.json") + " --to csv -o " + csv);
  ASSERT_EQ(convert.code, 0) << convert.err;
  const CliRun plan = run("plan " + csv + " --json --time-limit 1");
  ASSERT_EQ(plan.code, 0) << plan.err;
  const auto doc = nlohmann::json::parse(plan.out);
  const CliRun replay = run("replay " + trace_file("resnet18_train.json") + " --json --time-limit 0 --policy gpumem");
  const std::int64_t peak = profiler_peak("resnet18_train.json");
  EXPECT_EQ(doc["lower_bound_bytes"], peak);
  EXPECT_EQ(nlohmann::json::parse(replay.out)["lower_bound_bytes"], peak);
  for (const char* to : {"pytorch", "perfetto", "jsonl"}) {
    const std::string out = testing::TempDir() + "converted." + to;
    const CliRun r = run("trace convert " + trace_file("transformer_train.json") + " --to " + to + " -o " + out);
    EXPECT_EQ(r.code, 0) << to << ": " << r.err;
    // Perfetto output is for viewing: counters and spans, no [memory]
    // events to read back (trace stats says so, exit 2).
    const CliRun back = run("trace stats " + out + " --json");
    EXPECT_EQ(back.code, std::string(to) == "perfetto" ? 2 : 0) << to << ": " << back.err;
  }
}

TEST(Cli, GzipTracesAreReadAndWritten) {
  // A gzip file made by Python (tools/make_gzip_fixtures.py) gives the
  // figures of the plain file.
  const CliRun plain = run("trace stats " + trace_file("leaky_mlp_train.json") + " --json");
  const CliRun gz = run("trace stats " + trace_file("leaky_mlp_train.json.gz") + " --json");
  ASSERT_EQ(gz.code, 0) << gz.err;
  auto a = nlohmann::json::parse(plain.out), b = nlohmann::json::parse(gz.out);
  EXPECT_EQ(b["trace"], trace_file("leaky_mlp_train.json.gz"));
  a.erase("trace");
  b.erase("trace");
  EXPECT_EQ(a, b);
  const CliRun replay =
      run("replay " + trace_file("leaky_mlp_train.json.gz") + " --json --time-limit 0 --policy gpumem");
  EXPECT_EQ(replay.code, 0) << replay.err;

  // -o NAME.gz writes gzip in every format, and it reads back.
  for (const char* to : {"pytorch", "perfetto", "csv", "jsonl"}) {
    const std::string out = testing::TempDir() + "converted_" + to + ".json.gz";
    const CliRun r = run("trace convert " + trace_file("leaky_mlp_train.json.gz") + " --to " + to + " -o " + out);
    ASSERT_EQ(r.code, 0) << to << ": " << r.err;
    const std::string bytes = gpumem::test::read_file_bytes(out);
    ASSERT_GE(bytes.size(), 2u);
    EXPECT_EQ(bytes.substr(0, 2), "\x1f\x8b") << to;
    // Perfetto output is for viewing: counters and spans, no [memory]
    // events to read back (trace stats says so, exit 2).
    const CliRun back = run("trace stats " + out + " --json");
    EXPECT_EQ(back.code, std::string(to) == "perfetto" ? 2 : 0) << to << ": " << back.err;
  }
}

TEST(Cli, DamagedGzipIsOneLineExitCode2AndNoOutput) {
  std::string z = gpumem::test::read_file_bytes(trace_file("leaky_mlp_train.json.gz"));
  const std::string truncated = testing::TempDir() + "truncated_trace.json.gz";
  std::ofstream(truncated, std::ios::binary) << z.substr(0, z.size() / 2);
  const std::string out = testing::TempDir() + "never_written.json.gz";
  std::remove(out.c_str());
  const CliRun r = run("trace convert " + truncated + " --to jsonl -o " + out);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "gpumem: error: " + truncated + ": byte " + std::to_string(z.size() / 2) +
                       ": the file ends inside gzip member 1 (it is truncated)\n");
  EXPECT_TRUE(r.out.empty());
  EXPECT_FALSE(std::ifstream(out).good()) << "no output file";

  z[z.size() - 8] = static_cast<char>(z[z.size() - 8] ^ 1);  // the last member's CRC
  const std::string bad_crc = testing::TempDir() + "bad_crc_trace.json.gz";
  std::ofstream(bad_crc, std::ios::binary) << z;
  const CliRun crc = run("replay " + bad_crc);
  EXPECT_EQ(crc.code, 2);
  EXPECT_NE(crc.err.find(bad_crc + ": byte " + std::to_string(z.size() - 8) + ": gzip member 2: the CRC-32"),
            std::string::npos)
      << crc.err;
  EXPECT_EQ(std::count(crc.err.begin(), crc.err.end(), '\n'), 1) << crc.err;
}

}  // namespace

namespace {

// Issue 10, item 10: the other kind of file gets a pointer to the command
// that reads it, on one line.
TEST(Cli, TheWrongKindOfFileNamesTheCommandThatReadsIt) {
  for (const std::string& trace : {trace_file("resnet18_train.json"), trace_file("leaky_mlp_train.json.gz")}) {
    for (const std::string& command : {"inspect ", "plan "}) {
      const CliRun r = run(command + trace);
      EXPECT_EQ(r.code, 2) << command << trace;
      EXPECT_TRUE(r.out.empty());
      EXPECT_NE(r.err.find(trace + ": a memory trace, not an ONNX model: read it with `gpumem trace stats` or "
                                   "`gpumem replay`"),
                std::string::npos)
          << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
  }
  const std::string onnx = model("resnet50");
  for (const std::string& command : {"trace stats ", "replay ", "trace convert --to csv -o /dev/null "}) {
    const CliRun r = run(command + onnx);
    EXPECT_EQ(r.code, 2) << command;
    EXPECT_NE(r.err.find(onnx + ": an ONNX model, not a memory trace: read it with `gpumem inspect`"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

// Issue 10, item 8: a directory is bad input with its path, never an
// internal error.
TEST(Cli, ADirectoryIsBadInputNamedOnOneLine) {
  const std::string dir = testing::TempDir() + "gpumem_a_directory_" + std::to_string(getpid());
  ASSERT_EQ(system(("mkdir -p " + dir).c_str()), 0);
  for (const std::string& command :
       {"inspect ", "plan ", "trace stats ", "replay ", "trace convert --to csv -o /dev/null "}) {
    const CliRun r = run(command + dir);
    EXPECT_EQ(r.code, 2) << command;
    EXPECT_EQ(r.err.rfind("gpumem: error: " + dir + ":", 0), 0u) << command << r.err;
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
