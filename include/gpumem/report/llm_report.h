#pragma once
// Reports of `gpumem llm`: text that explains every figure the way vLLM's
// start-up log explains its KV cache, and one JSON document (schema in
// docs/llm.md).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpumem/llm/llm_fit.h"
#include "gpumem/llm/vllm_sizing.h"

namespace gpumem {

inline constexpr int kLlmSchemaVersion = 1;

std::string render_llm_text(const llm::LlmPlan& plan);
nlohmann::ordered_json llm_to_json(const llm::LlmPlan& plan);

// `gpumem llm --engine vllm`: what vLLM will print at start-up, and the
// answers in its terms (blocks, tokens, concurrency).
// `levels`: the model in each format vLLM serves (empty when --quant chose one).
std::string render_vllm_text(const llm::LlmModel& model, const llm::VllmSizing& sizing,
                             const std::vector<llm::VllmQuantLevel>& levels = {});
nlohmann::ordered_json vllm_to_json(const llm::LlmModel& model, const llm::VllmSizing& sizing,
                                    const std::vector<llm::VllmQuantLevel>& levels = {});

}  // namespace gpumem
