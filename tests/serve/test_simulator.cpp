// The simulator's invariants, whatever the scheduler behind make_scheduler().
#include <string>

#include <gtest/gtest.h>

#include "gpumem/common/error.h"
#include "gpumem/llm/llm_model.h"
#include "gpumem/llm/serve_setup.h"
#include "gpumem/report/serve_report.h"
#include "gpumem/serve/trace_generator.h"
#include "test_paths.h"

namespace gpumem::serve {
namespace {

llm::LlmModel llama3_8b() {
  return llm::load_llm_model(
      (test::source_dir() / "tests" / "data" / "llm" / "configs" / "meta-llama-3-8b.json").string());
}

ServeSetup setup(uint64_t gpu_bytes = 80ull << 30) {
  llm::LlmRequest r;
  r.gpu_bytes = gpu_bytes;
  return llm::serve_setup(llama3_8b(), r, SchedulerConfig{}, TimeModel{});
}

TEST(ServeSetup, TheBudgetIsWhatGpumemLlmLeavesForTheCache) {
  const ServeSetup s = setup();
  EXPECT_EQ(s.kv_bytes_per_token, 131072u);  // 32 layers x 8 KV heads x 128 x 2 x 2 B
  EXPECT_EQ(s.overhead_bytes, llm::kDefaultOverheadBytes);
  EXPECT_GT(s.weights_bytes, 14ull << 30);  // 14.96 GiB of BF16
  EXPECT_EQ(s.kv_budget_bytes, (80ull << 30) - s.weights_bytes - s.activation_bytes - s.overhead_bytes);
  EXPECT_EQ(s.scheduler.kv_budget_bytes, s.kv_budget_bytes);
  EXPECT_EQ(s.scheduler.kv_bytes_per_token, 131072u);
  EXPECT_THROW(setup(16ull << 30), InputError);
}

TEST(StepTime, DecodeReadsTheWeightsAndPrefillComputes) {
  const ServeSetup s = setup();
  StepResult decode;
  decode.scheduled.push_back({0, 1, 1000, false});
  const double memory = (static_cast<double>(s.cost.weight_bytes) + 1001.0 * 131072) / s.time.bytes_per_s;
  EXPECT_DOUBLE_EQ(step_seconds(s.cost, s.time, decode), memory + s.time.step_overhead_s);
  StepResult prefill;
  prefill.scheduled.push_back({0, 2048, 0, true});
  const double compute = (2.0 * static_cast<double>(s.cost.parameters) * 2048 +
                          4.0 * static_cast<double>(s.cost.attention_width) * 2048 * 2048) /
                         s.time.flops_per_s;
  EXPECT_DOUBLE_EQ(step_seconds(s.cost, s.time, prefill), compute + s.time.step_overhead_s);
  EXPECT_GT(compute, 0.05);  // 8B parameters x 2048 tokens: tens of milliseconds
}

TEST(Simulator, EveryRequestCompletesAndTheFiguresHold) {
  const ServeSetup s = setup();
  TraceShape shape = trace_preset("sharegpt");
  shape.requests = 400;
  shape.rate_per_s = 8;
  const auto requests = generate_trace(shape);
  uint64_t tokens = 0;
  for (const Request& r : requests) tokens += r.output_tokens;
  const ServeSimulation sim = simulate_all(s, {Policy::kContiguous, Policy::kVllm, Policy::kGpumem}, requests);
  ASSERT_EQ(sim.runs.size(), 3u);
  EXPECT_EQ(sim.runs[0].name, "contiguous");
  EXPECT_EQ(sim.runs[2].name, "gpumem");
  for (const PolicyRun& r : sim.runs) {
    EXPECT_EQ(r.completed, requests.size()) << r.name;
    EXPECT_EQ(r.output_tokens, tokens) << r.name;
    const double makespan = r.end_s - r.first_arrival_s;
    EXPECT_GT(makespan, requests.back().arrival_s - requests.front().arrival_s) << r.name;
    EXPECT_DOUBLE_EQ(r.throughput_tokens_per_s, static_cast<double>(tokens) / makespan) << r.name;
    EXPECT_LE(r.ttft_p50_s, r.ttft_p99_s) << r.name;
    EXPECT_LE(r.latency_p50_s, r.latency_p99_s) << r.name;
    EXPECT_LE(r.ttft_p50_s, r.latency_p50_s) << r.name;
    EXPECT_GT(r.ttft_p50_s, 0) << r.name;
    EXPECT_GT(r.kv_utilization_mean, 0) << r.name;
    EXPECT_LE(r.kv_utilization_peak, 1.0) << r.name;
    EXPECT_GE(r.kv_utilization_peak, r.kv_utilization_mean) << r.name;
    EXPECT_GE(r.waste_fraction, 0) << r.name;
    EXPECT_LE(r.kv_utilization_mean + r.waste_fraction, 1.0) << r.name;
    EXPECT_GT(r.peak_running, 1u) << r.name;
    EXPECT_FALSE(r.kv_utilization_series.empty()) << r.name;
    EXPECT_LE(r.kv_utilization_series.size(), 100u) << r.name;
    for (double u : r.kv_utilization_series) EXPECT_LE(u, r.kv_utilization_peak + 1e-9) << r.name;
  }
}

TEST(Simulator, ASingleRequestTakesItsPrefillAndDecodes) {
  const ServeSetup s = setup();
  Request r;
  r.arrival_s = 5;
  r.prompt_tokens = 100;
  r.output_tokens = 3;
  const PolicyRun run = simulate(s, Policy::kVllm, {r});
  ASSERT_EQ(run.completed, 1u);
  // One prefill step (which samples the first token) and two decode steps.
  StepResult prefill, d1, d2;
  prefill.scheduled.push_back({0, 100, 0, true});
  d1.scheduled.push_back({0, 1, 100, false});
  d2.scheduled.push_back({0, 1, 101, false});
  const double first = step_seconds(s.cost, s.time, prefill);
  EXPECT_NEAR(run.ttft_p50_s, first, 1e-12);
  EXPECT_NEAR(run.latency_p50_s, first + step_seconds(s.cost, s.time, d1) + step_seconds(s.cost, s.time, d2), 1e-12);
  EXPECT_DOUBLE_EQ(run.first_arrival_s, 5);
  EXPECT_EQ(run.steps, 3u);
}

TEST(ServeReport, JsonHasTheIssuesFields) {
  const ServeSetup s = setup();
  TraceShape shape = trace_preset("alpaca");
  shape.requests = 50;
  const auto j = serve_to_json(simulate_all(s, {Policy::kVllm, Policy::kGpumem}, generate_trace(shape)));
  EXPECT_EQ(j["schema_version"], 1);
  ASSERT_EQ(j["policies"].size(), 2u);
  EXPECT_EQ(j["policies"][1]["name"], "gpumem");
  for (const char* key : {"name", "throughput_tokens_per_s", "kv_utilization_mean", "waste_fraction", "preemptions",
                          "prefix_hit_rate", "p50_latency_s", "p99_latency_s", "completed"})
    EXPECT_TRUE(j["policies"][0].contains(key)) << key;
  EXPECT_EQ(j["policies"][0]["completed"], 50);
}

}  // namespace
}  // namespace gpumem::serve
