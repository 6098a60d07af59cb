// Reading a weight file's header and tensor table through mmap, no data page
// touched. Goal: a multi-gigabyte file in under 50 ms. The file is a
// Llama-3-8B-shaped GGUF (291 tensors, 8,030,261,248 parameters, about
// 4.9 GB) written sparse, so it costs no disk.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "gpumem/weights/gguf.h"
#include "weights/gguf_fixtures.h"

namespace {

void BM_ReadGgufLlama3_8B(benchmark::State& state) {
  const std::string path = (std::filesystem::temp_directory_path() / "gpumem_bench_llama3_8b.gguf").string();
  gpumem::weights::write_gguf_sparse(path, gpumem::weights::test_gguf::llama3_8b());
  for (auto _ : state) {
    auto file = gpumem::weights::read_gguf(path);
    benchmark::DoNotOptimize(file.tensors.size());
  }
  std::remove(path.c_str());
}
BENCHMARK(BM_ReadGgufLlama3_8B)->Unit(benchmark::kMillisecond);

}  // namespace
