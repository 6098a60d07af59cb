#pragma once
// Reports of `gpumem finetune`: readable text and one JSON document (schema
// in docs/finetune.md).
#include <string>

#include <nlohmann/json.hpp>

#include "gpumem/finetune/finetune_fit.h"

namespace gpumem {

inline constexpr int kFinetuneSchemaVersion = 1;

std::string render_finetune_text(const finetune::FinetunePlan& plan, int top = 10);
nlohmann::ordered_json finetune_to_json(const finetune::FinetunePlan& plan, int top = 10);

}  // namespace gpumem
