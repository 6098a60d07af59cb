// `gpumem serve-sim` as users run it: a model config, a GPU, a trace.
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"
#include "test_paths.h"

namespace {

using gpumem::test::CliRun;
using gpumem::test::run;

std::string config() {
  return (gpumem::test::source_dir() / "tests" / "data" / "llm" / "configs" / "meta-llama-3-8b.json").string();
}
std::string example(const std::string& name) {
  return (gpumem::test::source_dir() / "examples" / "serve" / (name + ".csv")).string();
}

TEST(CliServeSim, JsonHasOnePolicyObjectEachWithTheIssuesFields) {
  const CliRun r = run("serve-sim " + config() + " --gpu 80GiB --requests " + example("alpaca") + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_EQ(doc["requests"], 2000);
  EXPECT_EQ(doc["kv_bytes_per_token"], 131072);
  ASSERT_EQ(doc["policies"].size(), 3u);
  const char* names[] = {"contiguous", "vllm", "gpumem"};
  for (size_t i = 0; i < 3; ++i) {
    const auto& p = doc["policies"][i];
    EXPECT_EQ(p["name"], names[i]);
    for (const char* key : {"throughput_tokens_per_s", "kv_utilization_mean", "waste_fraction", "preemptions",
                            "prefix_hit_rate", "p50_latency_s", "p99_latency_s", "completed"})
      EXPECT_TRUE(p.contains(key)) << key;
    EXPECT_EQ(p["completed"], 2000);
    EXPECT_LE(p["p50_latency_s"].get<double>(), p["p99_latency_s"].get<double>());
  }
}

TEST(CliServeSim, TextNamesTheBudgetAndEveryPolicy) {
  const CliRun r =
      run("serve-sim " + config() + " --gpu 80GiB --requests " + example("sharegpt") + " --policy vllm,gpumem");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* expected : {"KV cache    128.00 KiB per token", "Requests    1,000 over", "vllm", "gpumem",
                               "throughput (tok/s)", "latency p99"})
    EXPECT_NE(r.out.find(expected), std::string::npos) << expected << "\n" << r.out;
  EXPECT_EQ(r.out.find("contiguous"), std::string::npos) << r.out;
}

TEST(CliServeSim, UnderVllmThePoolIsTheOneGpumemLlmSizes) {
  // The same settings in vLLM's names: max_model_len, max_num_batched_tokens,
  // max_num_seqs, block_size.
  const std::string settings = " --gpu 24GiB --engine vllm@0.8.5 --gpu-memory-utilization 0.85";
  const CliRun llm =
      run("llm " + config() + settings + " --context 4096 --token-budget 2048 --max-seqs 256 --block-tokens 16 --json");
  ASSERT_EQ(llm.code, 0) << llm.err;
  const CliRun sim = run("serve-sim " + config() + settings + " --context 4096 --requests " + example("alpaca") +
                         " --policy vllm --json");
  ASSERT_EQ(sim.code, 0) << sim.err;
  const auto vllm = nlohmann::json::parse(llm.out), served = nlohmann::json::parse(sim.out);
  const uint64_t pool = served["kv_budget_bytes"];
  EXPECT_EQ(pool, vllm["num_gpu_blocks"].get<uint64_t>() * vllm["page_bytes"].get<uint64_t>() * 32);
  EXPECT_EQ(pool / served["kv_bytes_per_token"].get<uint64_t>(), vllm["kv_tokens"].get<uint64_t>());
  EXPECT_NE(served["engine"].get<std::string>().find("vllm 0.8.5"), std::string::npos);
  // The default is llama.cpp's sizing, a different pool.
  const CliRun llama = run("serve-sim " + config() + " --gpu 24GiB --context 4096 --requests " + example("alpaca") +
                           " --policy vllm --json");
  ASSERT_EQ(llama.code, 0) << llama.err;
  EXPECT_NE(nlohmann::json::parse(llama.out)["kv_budget_bytes"].get<uint64_t>(), pool);
}

TEST(CliServeSim, GenerateWritesTheBundledExample) {
  const CliRun r = run("serve-sim --generate bursty --count 1000");
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream in(example("bursty"), std::ios::binary);
  std::stringstream file;
  file << in.rdbuf();
  EXPECT_EQ(r.out, file.str());
}

TEST(CliServeSim, BadInputIsOneLineAndExit2) {
  const std::string bad = gpumem::test::write_temp("bad_trace.csv", "arrival_s,prompt_tokens,output_tokens\n1,x,2\n");
  CliRun r = run("serve-sim " + config() + " --gpu 80GiB --requests " + bad);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "gpumem: error: " + bad + ": line 2: prompt_tokens 'x' is not a whole number\n");
  r = run("serve-sim " + config() + " --gpu 80GiB --requests " + example("alpaca") + " --policy fifo");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "gpumem: error: --policy: unknown policy 'fifo' (policies: contiguous, vllm, gpumem)\n");
  r = run("serve-sim " + config() + " --gpu 16GiB --requests " + example("alpaca"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("leave no room for a KV cache on a 16.00 GiB GPU"), std::string::npos) << r.err;
  r = run("serve-sim " + config() + " --gpu 80GiB --requests " + example("sharegpt") + " --context 512");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("is longer than max_model_len 512"), std::string::npos) << r.err;
}

}  // namespace

namespace {

TEST(CliServeSim, TimeModelFlagsAreCheckedAndApplied) {
  const std::string base =
      "serve-sim " + config() + " --gpu 80GiB --requests " + example("alpaca") + " --policy vllm --json";
  CliRun r = run(base + " --step-overhead 0 --bandwidth 1TB --flops 1e14");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["time_model"]["step_overhead_s"], 0.0);
  EXPECT_EQ(doc["time_model"]["bytes_per_s"], 1e12);
  EXPECT_EQ(doc["time_model"]["flops_per_s"], 1e14);
  r = run(base + " --step-overhead=-1");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "gpumem: error: --step-overhead: '-1' is not a non-negative number\n");
  r = run(base + " --flops fast");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "gpumem: error: --flops: 'fast' is not a positive number\n");
}

}  // namespace

namespace {

// The engine's kind is engine_rules' reading of --engine, not its spelling:
// vLLM's flags and refusals hold under "vLLM@0.21.0" as under "vllm".
TEST(CliServeSim, AnEnginesFlagsFollowItsKindNotItsSpelling) {
  const CliRun r =
      run("serve-sim " + config() + " --gpu 80GiB --requests " + example("bursty") + " --engine vLLM --overhead 1GiB");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--overhead does not apply under --engine vllm"), std::string::npos) << r.err;
}

}  // namespace
