#pragma once
// Reports of `gpumem plan`: readable text and one JSON document (schema in
// docs/plan.md, "JSON: plan").
#include <string>

#include <nlohmann/json.hpp>

#include "gpumem/infer/planner.h"

namespace gpumem {

inline constexpr int kPlanSchemaVersion = 1;

std::string render_plan_text(const infer::PlanReport& report);
nlohmann::ordered_json plan_to_json(const infer::PlanReport& report);

std::string render_validation_text(const infer::ValidationReport& report);

}  // namespace gpumem
