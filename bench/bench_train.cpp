// `gpumem train`'s prediction of one training step. Goal: a 1,000-node
// graph in under 50 ms. BERT-base (1,400 nodes) is the largest bundled
// graph; the prediction is timed with the model already loaded, and end to
// end from the file.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>

#include <random>

#include "gpumem/model/onnx_loader.h"
#include "gpumem/trace/lifetimes.h"
#include "gpumem/trace/replay.h"
#include "gpumem/train/checkpoint_plan.h"
#include "gpumem/train/device_memory.h"
#include "gpumem/train/fit.h"
#include "gpumem/train/training_step.h"

namespace {

std::string path_of(const char* dir, const char* name) {
  return (std::filesystem::path(GPUMEM_SOURCE_DIR) / dir / (std::string(name) + ".onnx")).string();
}

void BM_PredictStep(benchmark::State& state, const char* dir, const char* name) {
  const gpumem::Model model = gpumem::load_onnx_model(path_of(dir, name));
  gpumem::train::TrainOptions options;
  state.counters["nodes"] = static_cast<double>(model.graph.nodes.size());
  for (auto _ : state) {
    auto step = gpumem::train::predict_training_step(model, options);
    benchmark::DoNotOptimize(step.peak_bytes);
  }
}

void BM_PredictStepFromFile(benchmark::State& state, const char* dir, const char* name) {
  const std::string path = path_of(dir, name);
  gpumem::train::TrainOptions options;
  for (auto _ : state) {
    auto step = gpumem::train::predict_training_step(path, options);
    benchmark::DoNotOptimize(step.peak_bytes);
  }
}

// The checkpointing dynamic program on a chain of 1,000 units (goal: proven
// optimal in under 1 s), at a budget of half the activations: each unit
// frees its activations when checkpointed and keeps its input instead; a
// run of units under one checkpoint keeps only the first one's input.
// state.range(1): the longest run offered (1: single modules).
void BM_SolveChain(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  std::mt19937_64 rng(7);
  gpumem::train::ChainProblem p;
  p.max_segment = static_cast<int>(state.range(1));
  int64_t total = 0;
  std::vector<int64_t> activations(n);
  p.need.push_back(gpumem::train::kNoNeed);
  for (size_t i = 0; i < n; ++i) {
    activations[i] = 1'000'000 + static_cast<int64_t>(rng() % 9'000'000);
    const int64_t input = activations[i] / 8;
    p.cost.push_back(static_cast<uint64_t>(activations[i]) * 3);
    p.joins_previous.push_back(i > 0);
    p.normal.push_back({0, 0});
    p.in_segment.emplace_back();
    for (size_t j = 0; j < static_cast<size_t>(p.max_segment) && j <= i; ++j)
      p.in_segment.back().push_back({activations[i] - (j == 0 ? input : 0), activations[i] - (j == 0 ? input : 0)});
    p.need_backward.push_back(gpumem::train::kNoNeed);
    total += activations[i];
  }
  int64_t prefix = 0;
  for (size_t i = 0; i < n; ++i) {
    prefix += activations[i];
    p.need.push_back(prefix - total / 2);  // live above the budget once units 0..i are stored
  }
  for (auto _ : state) {
    auto s = gpumem::train::solve_chain(p);
    benchmark::DoNotOptimize(s.cost);
    state.counters["feasible"] = s.feasible;
  }
}
BENCHMARK(BM_SolveChain)->Args({100, 1})->Args({1000, 1})->Args({1000, 16})->Unit(benchmark::kMillisecond);

// What `fit` pays for each step it judges: the step's reserved peak under
// PyTorch's allocator, from its allocations directly (what device_memory()
// does since issue 45), and by the round trip it replaced: the step written
// as a trace with invented addresses, its lifetimes extracted again, then
// replayed. Both give the same figure (FitOnTheDevice tests check it).
void BM_StepOnTheDevice(benchmark::State& state, bool through_a_trace) {
  const gpumem::Model model = gpumem::load_onnx_model(path_of("examples/models", "bert_base"));
  const gpumem::train::TrainingStep step = gpumem::train::predict_training_step(model, {});
  state.counters["allocations"] = static_cast<double>(step.allocations.size());
  for (auto _ : state) {
    if (through_a_trace) {
      const gpumem::trace::Trace t = gpumem::train::step_trace(step, /*contexts=*/false);
      const gpumem::trace::Lifetimes lifetimes = gpumem::trace::extract_lifetimes(t, 0, /*strict=*/true);
      benchmark::DoNotOptimize(gpumem::trace::replay_policy(t, lifetimes, "pytorch", 0).peak_reserved);
    } else {
      benchmark::DoNotOptimize(gpumem::train::device_memory(step).reserved_peak);
    }
  }
}
BENCHMARK_CAPTURE(BM_StepOnTheDevice, allocations, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StepOnTheDevice, through_a_trace, true)->Unit(benchmark::kMillisecond);

// `gpumem fit`'s search on the bundled BERT-base graph at 3/4 of what the
// unchanged step needs on the device (reserved under PyTorch's allocator +
// the default overhead).
void BM_FitBert(benchmark::State& state) {
  const std::string path = path_of("examples/models", "bert_base");
  gpumem::train::FitRequest request;
  request.budget =
      gpumem::train::device_memory(gpumem::train::predict_training_step(path, request.options)).device_bytes() * 3 / 4;
  state.counters["fits"] = gpumem::train::fit_training(path, request).fits;
  for (auto _ : state) {
    auto fit = gpumem::train::fit_training(path, request);
    benchmark::DoNotOptimize(fit.predicted_peak);
  }
}
BENCHMARK(BM_FitBert)->Unit(benchmark::kMillisecond);

BENCHMARK_CAPTURE(BM_PredictStep, bert_base, "examples/models", "bert_base")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PredictStepFromFile, bert_base, "examples/models", "bert_base")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PredictStep, transformer_adamw, "tests/data/train", "transformer_adamw")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PredictStep, mobilenet_v2_sgd, "tests/data/train", "mobilenet_v2_sgd")
    ->Unit(benchmark::kMillisecond);

}  // namespace
