#pragma once
// Reports of `gpumem fit`: readable text and one JSON document (schema in
// docs/fit.md), and the files --emit writes.
#include <string>

#include <nlohmann/json.hpp>

#include "gpumem/train/fit.h"

namespace gpumem {

inline constexpr int kFitSchemaVersion = 1;

std::string render_fit_text(const train::FitResult& fit);
nlohmann::ordered_json fit_to_json(const train::FitResult& fit);

// --emit checkpoint: the modules to wrap, as JSON.
std::string checkpoint_plan_json(const train::FitResult& fit);

}  // namespace gpumem
