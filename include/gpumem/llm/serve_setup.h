#pragma once
// What serving a language model leaves for its KV cache, as `gpumem
// serve-sim` simulates it (serve/simulator.h): the bridge from llm's
// accounting to the paged cache, so that the serving module itself needs no
// model (and a C++ server embeds its KV block manager alone).
#include "gpumem/llm/llm_fit.h"
#include "gpumem/llm/vllm_sizing.h"
#include "gpumem/serve/simulator.h"

namespace gpumem::llm {

// What the time model needs of the model: parameters, weight and KV bytes,
// the attention's width.
serve::ModelCost model_cost(const LlmPlan& plan);
// The KV budget and the model's cost from plan_llm at context =
// max_model_len, batch 1 and ubatch = the token budget. InputError when the
// weights and one forward leave nothing for the cache.
//
// With `vllm` (--engine vllm), the pool is the one vLLM itself would make
// (llm/vllm_sizing.h): num_gpu_blocks whole blocks, what its profile run
// leaves at gpu_memory_utilization; everything else on the GPU (non-torch
// memory, CUDA graphs, the share vLLM leaves alone) counts as overhead.
serve::ServeSetup serve_setup(const LlmModel& model, const LlmRequest& request, const serve::SchedulerConfig& scheduler,
                              const serve::TimeModel& time, const VllmSizing* vllm = nullptr);

}  // namespace gpumem::llm
