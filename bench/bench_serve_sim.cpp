// serve-sim's speed goal (issue 14): a simulated hour at 10 requests/s
// (36,000 ShareGPT-shaped requests, Llama-3-8B on an 80 GiB GPU) in under
// 10 s per policy. Runs each policy five times and prints the median.
//
//   build/bench/gpumem_serve_sim_bench [runs]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gpumem/llm/llm_model.h"
#include "gpumem/llm/serve_setup.h"
#include "gpumem/serve/trace_generator.h"

int main(int argc, char** argv) {
  using namespace gpumem::serve;
  const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  TraceShape shape = trace_preset("sharegpt");
  shape.rate_per_s = 10;
  shape.requests = 36000;
  const auto requests = generate_trace(shape);
  gpumem::llm::LlmRequest r;
  r.gpu_bytes = 80ull << 30;
  const ServeSetup setup = gpumem::llm::serve_setup(
      gpumem::llm::load_llm_model(std::string(GPUMEM_SOURCE_DIR) + "/tests/data/llm/configs/meta-llama-3-8b.json"), r,
      SchedulerConfig{}, TimeModel{});
  std::printf("%zu requests over %.0f simulated seconds\n", requests.size(), requests.back().arrival_s);
  for (Policy p : {Policy::kContiguous, Policy::kVllm, Policy::kGpumem}) {
    std::vector<double> seconds;
    PolicyRun last;
    for (int i = 0; i < runs; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      last = simulate(setup, p, requests);
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(seconds.begin(), seconds.end());
    std::printf("%-10s median %.3f s (min %.3f, max %.3f) over %d runs: %llu steps, %llu completed, makespan %.0f s\n",
                policy_name(p), seconds[seconds.size() / 2], seconds.front(), seconds.back(), runs,
                static_cast<unsigned long long>(last.steps), static_cast<unsigned long long>(last.completed),
                last.end_s - last.first_arrival_s);
  }
  return 0;
}
