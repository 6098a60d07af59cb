#pragma once
// Reports of `gpumem weights`: readable text and one JSON document (schema
// in docs/weights.md).
#include <string>

#include <nlohmann/json.hpp>

#include "gpumem/weights/weight_summary.h"

namespace gpumem {

inline constexpr int kWeightsSchemaVersion = 1;

std::string render_weights_text(const weights::WeightSummary& summary, int top = 10);
nlohmann::ordered_json weights_to_json(const weights::WeightSummary& summary);

}  // namespace gpumem
