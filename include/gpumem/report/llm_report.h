#pragma once
// Reports of `gpumem llm`: text that explains every figure the way vLLM's
// start-up log explains its KV cache, and one JSON document (schema in
// docs/llm.md).
#include <string>

#include <nlohmann/json.hpp>

#include "gpumem/llm/llm_fit.h"

namespace gpumem {

inline constexpr int kLlmSchemaVersion = 1;

std::string render_llm_text(const llm::LlmPlan& plan);
nlohmann::ordered_json llm_to_json(const llm::LlmPlan& plan);

}  // namespace gpumem
