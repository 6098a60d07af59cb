// The serving simulator's setup from a language model: see
// include/gpumem/llm/serve_setup.h.
#include "gpumem/llm/serve_setup.h"

#include <algorithm>

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/common/units.h"

namespace gpumem::llm {

serve::ModelCost model_cost(const LlmPlan& plan) {
  serve::ModelCost c;
  c.parameters = plan.model.parameters();
  c.weight_bytes = plan.single.weights_bytes;
  c.kv_bytes_per_token = plan.kv.bytes_per_token;
  c.attention_width = uint64_t{plan.model.n_layer} * plan.model.n_head * plan.model.head_dim_k;
  return c;
}

serve::ServeSetup serve_setup(const LlmModel& model, const LlmRequest& request, const serve::SchedulerConfig& scheduler,
                              const serve::TimeModel& time, const VllmSizing* vllm) {
  LlmRequest r = request;
  r.context = scheduler.max_model_len;
  r.batch = 1;
  r.ubatch = scheduler.token_budget;
  r.gpus = 1;
  const LlmPlan plan = plan_llm(model, r);
  serve::ServeSetup s;
  s.model_source = model.source;
  s.gpu_bytes = r.gpu_bytes;
  s.weights_bytes = plan.single.weights_bytes;
  s.activation_bytes = plan.single.activation_bytes;
  s.overhead_bytes = plan.single.overhead_bytes;
  s.kv_bytes_per_token = plan.kv.bytes_per_token;
  const uint64_t fixed = s.weights_bytes + s.activation_bytes + s.overhead_bytes;
  if (fixed >= s.gpu_bytes || s.kv_bytes_per_token == 0)
    throw InputError(fmt::format(
        "{}: the weights ({}), one forward's activations ({}) and the runtime ({}) leave no room for a KV cache on "
        "a {} GPU",
        model.source, format_bytes(s.weights_bytes), format_bytes(s.activation_bytes), format_bytes(s.overhead_bytes),
        format_bytes(s.gpu_bytes)));
  s.kv_budget_bytes = s.gpu_bytes - fixed;
  s.engine = fmt::format("{} {}", r.engine.name, r.engine.version);
  if (vllm != nullptr) {
    if (vllm->num_gpu_blocks == 0)
      throw InputError(
          fmt::format("{}: vLLM would have no KV cache blocks on a {} GPU at gpu_memory_utilization {:.2f}",
                      model.source, format_bytes(s.gpu_bytes), vllm->request.gpu_memory_utilization));
    s.engine = fmt::format("{} {}, gpu_memory_utilization {:.2f}: {} blocks", vllm->rules.name, vllm->rules.version,
                           vllm->request.gpu_memory_utilization, vllm->num_gpu_blocks);
    s.weights_bytes = vllm->weights_bytes;
    s.activation_bytes = vllm->activation_bytes;
    s.kv_budget_bytes = vllm->num_gpu_blocks * vllm->page_bytes * model.n_layer;
    s.overhead_bytes = s.gpu_bytes - std::min(s.gpu_bytes, s.weights_bytes + s.activation_bytes + s.kv_budget_bytes);
  }
  s.cost = model_cost(plan);
  s.time = time;
  s.scheduler = scheduler;
  s.scheduler.kv_bytes_per_token = s.kv_bytes_per_token;
  s.scheduler.kv_budget_bytes = s.kv_budget_bytes;
  return s;
}

}  // namespace gpumem::llm
