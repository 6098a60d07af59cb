#pragma once
// Reports of `gpumem inspect`: a readable text and one JSON document whose
// schema is documented in the README ("JSON: inspect").
#include <string>

#include <nlohmann/json.hpp>

#include "gpumem/model/inspect.h"

namespace gpumem {

struct ReportOptions {
  int top = 10;  // how many of the largest activations to list
};

std::string render_inspect_text(const InspectResult& result, const ReportOptions& options = {});
nlohmann::ordered_json inspect_to_json(const InspectResult& result, const ReportOptions& options = {});

// Version of the inspect JSON document; bumped on any incompatible change.
inline constexpr int kInspectSchemaVersion = 1;

}  // namespace gpumem
