// Quantization throughput in bytes of fp32 input per second, one core.
// Goals (issue 13): Q8_0 at 1 GB/s or more; Q4_K within 3x of Q8_0's time. 64 MiB of input, far beyond the
// caches, so the figure includes reading the floats from memory.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gpumem/weights/bnb_quantize.h"
#include "gpumem/weights/quantize.h"

namespace {

using gpumem::weights::GgmlTypeId;

const std::vector<float>& input() {
  static const std::vector<float> data = [] {
    std::vector<float> v(64u << 20 >> 2);
    uint32_t state = 12345;
    for (float& x : v) {
      state = state * 1664525u + 1013904223u;
      x = (static_cast<float>(state >> 8) / 8388608.0f - 1.0f) * 0.05f;  // weights' typical scale
    }
    return v;
  }();
  return data;
}

void BM_Quantize(benchmark::State& state, GgmlTypeId type) {
  const auto& x = input();
  for (auto _ : state) {
    std::string q = gpumem::weights::quantize(type, x.data(), x.size());
    benchmark::DoNotOptimize(q.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(x.size() * sizeof(float)));
}
BENCHMARK_CAPTURE(BM_Quantize, q8_0, GgmlTypeId::kQ8_0)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Quantize, q4_0, GgmlTypeId::kQ4_0)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Quantize, q5_0, GgmlTypeId::kQ5_0)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Quantize, q5_1, GgmlTypeId::kQ5_1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Quantize, q4_K, GgmlTypeId::kQ4_K)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Quantize, q5_K, GgmlTypeId::kQ5_K)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Quantize, q6_K, GgmlTypeId::kQ6_K)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Quantize, f16, GgmlTypeId::kF16)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Quantize, bf16, GgmlTypeId::kBF16)->Unit(benchmark::kMillisecond);

// bitsandbytes' formats (bnb_quantize.h): NF4 with and without double
// quantization, and int8 with one absmax per row of 4096.
void BM_QuantizeNf4(benchmark::State& state, bool double_quant) {
  const auto& x = input();
  for (auto _ : state) {
    auto q = gpumem::weights::quantize_nf4(x.data(), x.size(), double_quant);
    benchmark::DoNotOptimize(q.packed.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(x.size() * sizeof(float)));
}
BENCHMARK_CAPTURE(BM_QuantizeNf4, nf4, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_QuantizeNf4, nf4_double_quant, true)->Unit(benchmark::kMillisecond);

void BM_QuantizeInt8Rowwise(benchmark::State& state) {
  const auto& x = input();
  constexpr size_t kCols = 4096;
  for (auto _ : state) {
    auto q = gpumem::weights::quantize_int8_rowwise(x.data(), x.size() / kCols, kCols);
    benchmark::DoNotOptimize(q.q.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(x.size() * sizeof(float)));
}
BENCHMARK(BM_QuantizeInt8Rowwise)->Unit(benchmark::kMillisecond);

}  // namespace
