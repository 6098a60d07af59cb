#pragma once
// "Can I run this model, with this context, on this GPU?": the memory of
// serving a decoder (weights, KV cache, one forward's activations, the CUDA
// context), whether it fits, the longest context and largest batch that
// do, how many layers to keep on the GPU when it does not, and the split
// over several GPUs.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpumem/common/device_defaults.h"
#include "gpumem/common/verdict.h"
#include "gpumem/llm/engines.h"
#include "gpumem/llm/llm_memory.h"
#include "gpumem/llm/llm_model.h"

namespace gpumem::llm {

// The CUDA context, cuBLAS workspaces and the runtime's own allocations
// that no model figure accounts for: the stated constant every command
// shares (gpumem/common/device_defaults.h); --overhead replaces it.
inline constexpr uint64_t kDefaultOverheadBytes = kDefaultCudaOverheadBytes;

struct LlmRequest {
  uint64_t context = 0;    // tokens per sequence; 0: the model's training context
  uint64_t batch = 1;      // sequences served at once, each with `context` tokens cached
  uint64_t ubatch = 512;   // tokens one forward processes (llama.cpp's n_ubatch)
  uint64_t gpu_bytes = 0;  // memory of one GPU
  uint32_t gpus = 1;
  std::string quant;             // a ggml type for the weight matrices ("q4_k", "q8_0"...); "" keeps the file's
  std::string kv_dtype = "f16";  // K and V ("q8_0"), or K then V ("q8_0,f16")
  bool flash_attention = true;
  uint64_t overhead_bytes = kDefaultOverheadBytes;
  double pcie_bytes_per_second = kDefaultPcieBytesPerSecond;
  EngineRules engine;  // the newest llama.cpp's unless --engine says otherwise
};

// What one GPU holds under a placement.
struct GpuMemory {
  uint64_t weights_bytes = 0;
  uint64_t kv_bytes = 0;
  uint64_t activation_bytes = 0;
  uint64_t overhead_bytes = 0;
  uint64_t other_bytes = 0;  // staging buffers of the streaming plan
  uint64_t total() const { return weights_bytes + kv_bytes + activation_bytes + overhead_bytes + other_bytes; }
};

// llama.cpp's -ngl: the last `gpu_layers` layers (weights and their KV
// cache) on the GPU, the rest and the token embeddings in host memory; the
// output layer joins the GPU once every layer is there.
struct LayerOffload {
  bool fits = false;  // false when not even zero layers fit (activations and overhead alone)
  uint32_t gpu_layers = 0;
  GpuMemory gpu;
  uint64_t host_bytes = 0;  // weights and KV cache left in (pinned) host memory
};

// Streaming instead: every layer runs on the GPU; the layers that do not
// stay resident are copied in from pinned host memory one at a time, the
// next one's copy overlapping the current one's compute, into two staging
// buffers of the largest layer. Every token (of decoding) streams them all.
struct StreamingPlan {
  bool possible = false;
  uint32_t resident_layers = 0;
  uint32_t streamed_layers = 0;
  uint64_t staging_bytes = 0;
  uint64_t streamed_bytes_per_token = 0;
  double seconds_per_token = 0;  // streamed bytes / PCIe bandwidth: the floor of a decode step
  GpuMemory gpu;
};

// Several GPUs: tensor parallel (each matrix split; attention heads, KV
// heads, the feed-forward and the vocabulary divided, norms replicated) and
// pipeline parallel (contiguous layers per GPU, the embeddings on the
// first, the output on the last).
struct MultiGpu {
  uint32_t gpus = 1;
  bool tensor_parallel_valid = false;  // heads divide evenly
  GpuMemory tensor_parallel;           // per GPU
  bool tensor_parallel_fits = false;
  std::vector<uint32_t> pipeline_layers;  // layers per GPU
  std::vector<GpuMemory> pipeline;        // per GPU
  bool pipeline_fits = false;
};

// The model at one quantization level, placed as the engine places it.
struct QuantLevel {
  std::string quant;  // a `gpumem quantize --type` recipe: "q8_0", "q4_k_m"...
  uint64_t weights_bytes = 0;
  Verdict verdict;  // every layer on the GPU at the request's context and batch
};

struct LlmPlan {
  LlmModel model;  // with the weights priced at the requested quantization
  LlmRequest request;
  // Whether it runs with everything the engine puts on the GPU there:
  // llama.cpp (and ollama, which runs it) keep the token embeddings in host
  // memory at any -ngl ("there is little benefit to offloading the input
  // layer"), so one GPU holds every layer, their cache, the output layer,
  // one forward and the overhead (offload at every layer); over several
  // GPUs, the placement below.
  Verdict verdict;
  GpuMemory placed;         // what the verdict's GPU holds (the fullest GPU over several)
  uint64_t host_bytes = 0;  // one GPU: what that placement leaves in host memory (the token embeddings)
  // Ollama's library tags are 4-bit: with --engine ollama and no --quant, a
  // full-precision source is priced as q4_k_m ("" when not).
  std::string default_quant;
  // What else would run: the quantization levels llama.cpp writes, from the
  // largest, each placed as above (empty over several GPUs).
  std::vector<QuantLevel> quant_levels;
  uint64_t context = 0;  // the context used (the request's or the model's)
  KvTypes kv_types;
  KvCache kv;
  ForwardPeak forward;
  GpuMemory single;          // everything on one GPU
  uint64_t max_context = 0;  // longest context per sequence that fits at `batch` (capped at the training context)
  bool max_context_capped = false;  // the search stopped at max(training context, context); memory allows more
  uint64_t max_batch = 0;           // most sequences of `context` tokens that fit
  LayerOffload offload;
  StreamingPlan streaming;
  std::optional<MultiGpu> multi;  // when gpus > 1
};

// Throws InputError for a request that cannot be answered (no GPU size, a
// quantization the tensors cannot take, a zero context with no training
// context to default to).
LlmPlan plan_llm(LlmModel model, const LlmRequest& request);

// The model's tensors priced as `gpumem quantize --type quant` would write
// them (a recipe: q8_0, q4_k_m, ...; llama-quantize's choice per tensor,
// vectors in F32, its fallbacks for rows that are not whole blocks).
LlmModel requantized(LlmModel model, const std::string& quant);

}  // namespace gpumem::llm
