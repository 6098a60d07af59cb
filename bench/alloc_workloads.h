#pragma once
// Allocation sequences for comparing allocator policies: what deep-learning
// jobs ask of an allocator. Deterministic (seeded) so figures reproduce.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gpumem/alloc/caching_allocator.h"

namespace gpumem::alloc::bench {

struct Op {
  bool allocate;
  std::uint32_t id;    // names the allocation; frees refer to it
  std::size_t bytes;   // allocations only
  StreamId stream = kDefaultStream;
};

struct Workload {
  std::string name;
  std::string description;
  std::vector<Op> ops;
};

// GPT-2-small-like training steps (12 layers, hidden 768, batch 8, fp16
// activations, fp32 Adam states) whose sequence length changes every step,
// as with unpadded text batches: the case that fragments PyTorch's cache.
Workload transformer_training_dynamic();
// ResNet-50-like training steps at a fixed batch: shapes repeat exactly.
Workload cnn_training_fixed();
// LLM decoding: four concurrent requests whose per-layer KV caches grow by
// concatenation (allocate bigger, copy, free the old one).
Workload llm_kv_cache_growth();
// Log-uniform sizes from 512 B to 64 MiB with random lifetimes.
Workload mixed_random();
// Many tensors under 1 MiB (the small pool only).
Workload small_tensors();
// A bundled ONNX model's activations in node order (allocate at the
// producer, free after the last reader), run at several batch sizes in turn,
// as a server with dynamic batching does.
Workload onnx_model(const std::string& path, const std::vector<std::int64_t>& batches);

std::vector<Workload> all_workloads(const std::string& source_dir);

struct ReplayResult {
  std::size_t peak_allocated = 0;
  std::size_t peak_reserved = 0;
  std::int64_t device_calls = 0;  // allocate/map plus free/unmap
  std::int64_t ooms = 0;
};

// Runs the workload on a fresh simulated device of `capacity` bytes.
ReplayResult replay(const Workload& w, const AllocatorConfig& config, std::size_t capacity);

}  // namespace gpumem::alloc::bench
