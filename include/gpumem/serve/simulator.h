#pragma once
// `gpumem serve-sim`: a request trace served by each scheduling policy on
// one GPU, in simulated time. The KV budget is given (llm/serve_setup.h
// takes it from gpumem llm's accounting: GPU memory - weights - one
// forward's activations - runtime overhead); each step's duration comes
// from a roofline time model:
//
//   step = max(compute, memory) + step overhead
//   compute = (2 x parameters x tokens + attention) / flops
//             attention = 4 x layers x heads x head_dim x sum over sequences
//                         of tokens x (context + tokens)
//   memory  = (weight bytes + KV bytes per token x sum over sequences of
//              (context + tokens)) / bandwidth
//
// where `tokens` are the step's scheduled tokens (prefill chunks and one
// per decode) and `context` what each sequence had cached before. Defaults
// are effective rates of an H100 SXM (docs/serve.md): half of its 989
// dense BF16 TFLOP/s and 80% of its 3.35 TB/s.
#include <cstdint>
#include <string>
#include <vector>

#include "gpumem/serve/scheduler.h"

namespace gpumem::serve {

struct TimeModel {
  double flops_per_s = 989e12 * 0.5;
  double bytes_per_s = 3.35e12 * 0.8;
  double step_overhead_s = 0.5e-3;  // scheduling, kernel launches, sampling
};

// What the time model needs of the model.
struct ModelCost {
  uint64_t parameters = 0;
  uint64_t weight_bytes = 0;
  uint64_t kv_bytes_per_token = 0;
  uint64_t attention_width = 0;  // layers x heads x head_dim
};

// Seconds one step takes.
double step_seconds(const ModelCost& cost, const TimeModel& time, const StepResult& step);

struct PolicyRun {
  std::string name;
  uint64_t requests = 0, completed = 0;
  uint64_t output_tokens = 0;  // of completed requests
  uint64_t steps = 0;
  double first_arrival_s = 0, end_s = 0;  // makespan = end_s - first_arrival_s
  double throughput_tokens_per_s = 0;     // output tokens / makespan
  double kv_utilization_mean = 0;         // time-weighted used / pool
  double kv_utilization_peak = 0;
  double waste_fraction = 0;  // time-weighted (reserved - used) / pool
  uint64_t preemptions = 0, recomputed_tokens = 0, swapped_bytes = 0;
  uint64_t prefix_hit_tokens = 0, prefix_query_tokens = 0;
  double prefix_hit_rate = 0;  // hit / query tokens; 0 when nothing was looked up
  uint32_t peak_running = 0;
  double ttft_p50_s = 0, ttft_p99_s = 0;
  double latency_p50_s = 0, latency_p99_s = 0;
  double series_interval_s = 0;  // utilisation over time: one mean per interval
  std::vector<double> kv_utilization_series;
};

struct ServeSetup {
  std::string model_source;
  std::string engine;  // whose sizing made the pool: "llama.cpp newest", "vllm 0.8.0"
  uint64_t gpu_bytes = 0;
  uint64_t weights_bytes = 0, activation_bytes = 0, overhead_bytes = 0;
  uint64_t kv_budget_bytes = 0;
  uint64_t kv_bytes_per_token = 0;
  ModelCost cost;
  TimeModel time;
  SchedulerConfig scheduler;  // policy set per run
};

// Serves `requests` (in arrival order) under one policy. InternalError-ish
// std::runtime_error if the scheduler stops making progress.
PolicyRun simulate(const ServeSetup& setup, Policy policy, const std::vector<Request>& requests);

struct ServeSimulation {
  ServeSetup setup;
  uint64_t requests = 0;
  double trace_span_s = 0;  // first to last arrival
  double mean_prompt_tokens = 0, mean_output_tokens = 0;
  std::vector<PolicyRun> runs;
};

// The trace's summary and one run per policy, in the order given.
ServeSimulation simulate_all(const ServeSetup& setup, const std::vector<Policy>& policies,
                             const std::vector<Request>& requests);

}  // namespace gpumem::serve
