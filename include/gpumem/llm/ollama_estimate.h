#pragma once
// ollama's own estimate of a model's memory, which decides how many layers
// it offloads (up to ollama 0.12.10, with its llama.cpp runner): the KV
// cache per layer without llama.cpp's padding, and a compute graph per
// architecture from formulas fitted by ollama's authors (fs/ggml/ggml.go,
// GraphSize), for a full and a partial offload. It is ollama's figure, not
// what llama.cpp then allocates; its logs print both ("memory.graph.full",
// "memory.required.kv", and llama.cpp's buffers).
#include <cstdint>
#include <string>
#include <vector>

#include "gpumem/llm/llm_memory.h"
#include "gpumem/llm/llm_model.h"

namespace gpumem::llm {

struct OllamaEstimate {
  std::vector<uint64_t> kv_per_layer;
  uint64_t kv_bytes = 0;
  uint64_t graph_full_bytes = 0;        // every layer on the GPU
  uint64_t graph_partial_bytes = 0;     // some layers on the CPU
  std::string formula;                  // which architecture's formulas, or the fallback
  std::vector<ForwardTerm> full_terms;  // the two candidates of the full-offload graph
};

// num_ctx per sequence, num_batch (ollama's default 512), num_parallel
// sequences, the KV type ollama passes ("f16", "q8_0", "q4_0").
OllamaEstimate ollama_estimate(const LlmModel& m, uint64_t num_ctx, uint64_t num_batch, uint64_t num_parallel,
                               const std::string& kv_type);

}  // namespace gpumem::llm
