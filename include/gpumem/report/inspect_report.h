#pragma once
// Reports of `gpumem inspect`: a readable text and one JSON document whose
// schema is documented in docs/inspect.md ("JSON: inspect").
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gpumem/infer/inference_levers.h"
#include "gpumem/model/inspect.h"

namespace gpumem {

struct ReportOptions {
  int top = 10;  // how many of the largest activations to list
  // What one inference needs, when computed (infer::inference_need): the
  // report's headline.
  std::optional<infer::InferenceNeed> need;
  std::vector<infer::InferenceLever> levers;  // advice after the report
};

std::string render_inspect_text(const InspectResult& result, const ReportOptions& options = {});
nlohmann::ordered_json inspect_to_json(const InspectResult& result, const ReportOptions& options = {});

// Version of the inspect JSON document; bumped on any incompatible change.
inline constexpr int kInspectSchemaVersion = 1;

}  // namespace gpumem
