// Planner speed: the heuristics on 10,000 buffers (goal: under 20 ms), and
// planning the bundled models end to end, load included (goal: under 100 ms).
#include <benchmark/benchmark.h>

#include <filesystem>
#include <random>

#include "gpumem/infer/planner.h"
#include "gpumem/plan/solver.h"

namespace {

// A graph-like instance: one tensor born per step, most living up to 50
// steps, one in a hundred (skip connections, saved activations) up to 2,000;
// sizes from 256 B to 8 MiB. About 330,000 conflicting pairs.
gpumem::plan::Problem synthetic(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  gpumem::plan::Problem p;
  const int64_t horizon = n;
  for (int i = 0; i < n; ++i) {
    const int64_t start = static_cast<int64_t>(rng() % static_cast<uint64_t>(horizon));
    const bool long_lived = rng() % 100 == 0;
    const int64_t len = 1 + static_cast<int64_t>(rng() % (long_lived ? 2000u : 50u));
    const int64_t size = int64_t{256} << (rng() % 16);
    p.buffers.push_back({std::to_string(i), start, start + len, size, 1, {}});
  }
  return p;
}

void BM_Heuristics10k(benchmark::State& state) {
  const auto p = synthetic(10000, 1);
  for (auto _ : state) {
    auto r = gpumem::plan::best_heuristic(p);
    benchmark::DoNotOptimize(r.plan.arena);
  }
}
BENCHMARK(BM_Heuristics10k)->Unit(benchmark::kMillisecond);

void BM_PlanModel(benchmark::State& state, const char* name) {
  const auto path =
      (std::filesystem::path(GPUMEM_SOURCE_DIR) / "examples" / "models" / (std::string(name) + ".onnx")).string();
  gpumem::infer::PlanRequest request;
  request.solve.time_limit_seconds = 1;
  for (auto _ : state) {
    auto r = gpumem::infer::plan_file(path, request);
    benchmark::DoNotOptimize(r.result.plan.arena);
  }
}
BENCHMARK_CAPTURE(BM_PlanModel, resnet50, "resnet50")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PlanModel, bert_base, "bert_base")->Unit(benchmark::kMillisecond);

}  // namespace
