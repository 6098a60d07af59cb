// `gpumem inspect` end to end (read, parse, infer and fold every shape,
// account memory) on the bundled models. Goal: BERT-base well under 200 ms
// on a 2-core machine.
#include <benchmark/benchmark.h>

#include <filesystem>

#include "gpumem/model/inspect.h"
#include "gpumem/report/inspect_report.h"

namespace {

std::filesystem::path model(const char* name) {
  return std::filesystem::path(GPUMEM_SOURCE_DIR) / "examples" / "models" / (std::string(name) + ".onnx");
}

void BM_Inspect(benchmark::State& state, const char* name) {
  const auto path = model(name);
  for (auto _ : state) {
    auto result = gpumem::inspect_model(path);
    benchmark::DoNotOptimize(result.memory.peak_live_bytes);
  }
}

void BM_InspectToJson(benchmark::State& state, const char* name) {
  const auto path = model(name);
  for (auto _ : state) {
    auto result = gpumem::inspect_model(path);
    auto text = gpumem::inspect_to_json(result).dump();
    benchmark::DoNotOptimize(text.data());
  }
}

BENCHMARK_CAPTURE(BM_Inspect, bert_base, "bert_base")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Inspect, resnet50, "resnet50")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Inspect, mobilenet_v2, "mobilenet_v2")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_InspectToJson, bert_base, "bert_base")->Unit(benchmark::kMillisecond);

}  // namespace
