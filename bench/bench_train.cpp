// `gpumem train`'s prediction of one training step. Goal: a 1,000-node
// graph in under 50 ms. BERT-base (1,400 nodes) is the largest bundled
// graph; the prediction is timed with the model already loaded, and end to
// end from the file.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>

#include "gpumem/model/onnx_loader.h"
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

BENCHMARK_CAPTURE(BM_PredictStep, bert_base, "examples/models", "bert_base")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PredictStepFromFile, bert_base, "examples/models", "bert_base")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PredictStep, transformer_adamw, "tests/data/train", "transformer_adamw")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PredictStep, mobilenet_v2_sgd, "tests/data/train", "mobilenet_v2_sgd")
    ->Unit(benchmark::kMillisecond);

}  // namespace
