#pragma once
// How vLLM sizes itself on one GPU (one tensor-parallel rank): its budget
// is gpu_memory_utilization x the GPU's memory; the weights, the peak of a
// profile forward of max_num_batched_tokens tokens and the memory outside
// PyTorch come off it; what is left is the KV cache, cut into blocks of
// block_size tokens. The figures vLLM prints at start-up ("model weights
// take", "PyTorch activation peak memory", "# GPU blocks", "GPU KV cache
// size: N tokens", "Maximum concurrency") are reproduced, and the reverse
// questions answered: the utilization, context or sequences that make a
// target concurrency fit. Rules per version: llm/engines.h;
// tests/data/llm/public/vllm_sizing_notes.md says where each is read.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpumem/common/verdict.h"
#include "gpumem/llm/engines.h"
#include "gpumem/llm/llm_model.h"

namespace gpumem::llm {

struct VllmRequest {
  uint64_t gpu_bytes = 0;  // total memory of one GPU, as CUDA reports it
  uint32_t tensor_parallel = 1;
  double gpu_memory_utilization = 0.9;
  uint64_t max_model_len = 0;           // 0: the model's training context
  uint64_t max_num_batched_tokens = 0;  // 0: vLLM's default for the version and GPU
  uint64_t max_num_seqs = 0;            // 0: vLLM's default
  uint32_t block_size = 16;
  uint32_t kv_bytes_per_value = 0;          // 0: the model's dtype ("auto"); 1 for fp8
  std::optional<uint64_t> non_torch_bytes;  // the default: kVllmNonTorchBytes (+ kVllmNcclBytes over GPUs)
  bool enforce_eager = false;               // no CUDA graphs
  uint64_t target_concurrency = 0;          // 0: no reverse question
};

// Memory outside PyTorch's allocator that grows while vLLM starts (cuBLAS
// workspaces, attention-backend buffers): 0.03 to 0.35 GiB in the public
// logs of one GPU (tests/data/llm/public/vllm_logs.json); NCCL's buffers
// add to it under tensor parallelism.
inline constexpr uint64_t kVllmNonTorchBytes = 200ull << 20;
inline constexpr uint64_t kVllmNcclBytes = 300ull << 20;

struct VllmSizing {
  EngineRules rules;
  VllmRequest request;            // with the defaults filled in
  uint64_t budget_bytes = 0;      // gpu x gpu_memory_utilization
  uint64_t weights_bytes = 0;     // this rank's weights and the rotary cache
  uint64_t activation_bytes = 0;  // the profile run's peak above the weights
  std::string activation_stage;   // "forward" or "sampler"
  std::string activation_formula;
  uint64_t non_torch_bytes = 0;
  uint64_t cuda_graph_bytes = 0;      // estimated; 0 with enforce_eager
  bool cuda_graph_in_budget = false;  // v0.21 on: taken before the KV cache is sized
  int64_t kv_cache_bytes = 0;         // what is left; negative when nothing is
  uint64_t page_bytes = 0;            // one block of one layer: block_size x 2 x kv heads x head_dim x bytes
  uint64_t num_gpu_blocks = 0;
  uint64_t kv_tokens = 0;                // num_gpu_blocks x block_size
  uint64_t blocks_per_request = 0;       // one max_model_len request, every layer (windows applied)
  double max_concurrency = 0;            // requests of max_model_len at once
  bool fits = false;                     // one request of max_model_len fits (else vLLM refuses to start)
  uint64_t max_model_len_that_fits = 0;  // vLLM's own estimate when it refuses
  int64_t headroom_bytes = 0;  // memory left on the GPU after the budget, graphs (outside it) and the CUDA context
  // The answer (common/verdict.h): the least GPU on which one request of
  // max_model_len gets its blocks at these settings, against gpu_bytes.
  Verdict verdict;
  // The reverse question, when target_concurrency is set:
  double utilization_for_target = 0;      // the gpu_memory_utilization that fits it; > 1 when none does
  uint64_t max_model_len_for_target = 0;  // at this utilization
};

// InputError for a request that cannot be answered (no GPU, a utilization
// outside (0, 1], heads that do not divide over the ranks).
VllmSizing size_vllm(const LlmModel& m, const VllmRequest& request, const EngineRules& rules);

// The model in each quantized format vLLM serves (llm/vllm_quant.h), sized
// with the same request: what would run when the checkpoint as given does
// not.
struct VllmQuantLevel {
  std::string quant;
  uint64_t weights_bytes = 0;  // per GPU
  uint64_t kv_tokens = 0;
  double max_concurrency = 0;
  Verdict verdict;
};
std::vector<VllmQuantLevel> vllm_quant_levels(const LlmModel& m, const VllmRequest& request, const EngineRules& rules);

}  // namespace gpumem::llm
