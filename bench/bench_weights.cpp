// Reading a weight file's header and tensor table through mmap, no data page
// touched. Goal: a multi-gigabyte file in under 50 ms. Also an index of
// 150,000 tiny tensors in one shard (issue 34: it took 87 s, then up to
// 1,369 s, as the header parse was quadratic in the member count). The files are
// Llama-3-8B-shaped (291 tensors, 8,030,261,248 parameters): a GGUF of about
// 4.9 GB and a bf16 safetensors of 16 GB, both written sparse, so they cost
// no disk.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpumem/common/files.h"
#include "gpumem/llm/llm_model.h"
#include "gpumem/weights/gguf.h"
#include "gpumem/weights/weight_file.h"
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

// The header of a bf16 Llama-3-8B safetensors (the tensors as the Llama
// layout derives them), the data left as a hole.
void write_sparse_llama3_8b_safetensors(const std::string& path) {
  gpumem::llm::LlmModel shape;
  shape.n_layer = 32;
  shape.n_embd = 4096;
  shape.n_head = 32;
  shape.n_head_kv = 8;
  shape.head_dim_k = shape.head_dim_v = 128;
  shape.n_ff = 14336;
  shape.n_vocab = 128256;
  nlohmann::ordered_json header;
  uint64_t offset = 0;
  for (const auto& t : gpumem::llm::decoder_tensors(shape, "BF16", "BF16")) {
    const std::vector<uint64_t> dims(t.shape.rbegin(), t.shape.rend());
    header[t.name] = {{"dtype", "BF16"}, {"shape", dims}, {"data_offsets", {offset, offset + t.bytes}}};
    offset += t.bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(text.size() >> (8 * i));
  bytes += text;
  gpumem::write_file_atomically(path, bytes, bytes.size() + offset);
}

void BM_ReadSafetensorsLlama3_8B(benchmark::State& state) {
  const std::string path = (std::filesystem::temp_directory_path() / "gpumem_bench_llama3_8b.safetensors").string();
  write_sparse_llama3_8b_safetensors(path);
  for (auto _ : state) {
    auto file = gpumem::weights::read_safetensors(path);
    benchmark::DoNotOptimize(file.tensors.size());
  }
  std::remove(path.c_str());
}
BENCHMARK(BM_ReadSafetensorsLlama3_8B)->Unit(benchmark::kMillisecond);

// One shard of N four-byte tensors and the index that maps each to it.
std::string write_wide_index(int n) {
  const auto dir = std::filesystem::temp_directory_path() / "gpumem_bench_wide_index";
  std::filesystem::create_directories(dir);
  const std::string shard = "model-00001-of-00001.safetensors";
  std::vector<gpumem::weights::TensorData> tensors;
  nlohmann::json index = {{"metadata", nlohmann::json::object()}, {"weight_map", nlohmann::json::object()}};
  for (int i = 0; i < n; ++i) {
    std::string name = "model.layers." + std::to_string(i / 100) + ".t" + std::to_string(i % 100) + ".weight";
    index["weight_map"][name] = shard;
    tensors.push_back({std::move(name), "F32", {1}, std::string(4, '\0')});
  }
  gpumem::write_file_atomically((dir / shard).string(), gpumem::weights::write_safetensors(tensors));
  const std::string path = (dir / "model.safetensors.index.json").string();
  gpumem::write_file_atomically(path, index.dump());
  return path;
}

void BM_ReadSafetensorsIndex150kTensors(benchmark::State& state) {
  const std::string index = write_wide_index(150'000);
  for (auto _ : state) {
    auto file = gpumem::weights::read_safetensors_index(index);
    benchmark::DoNotOptimize(file.tensors.size());
  }
  std::filesystem::remove_all(std::filesystem::path(index).parent_path());
}
BENCHMARK(BM_ReadSafetensorsIndex150kTensors)->Unit(benchmark::kMillisecond);

}  // namespace
