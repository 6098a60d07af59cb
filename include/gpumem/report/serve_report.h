#pragma once
// Reports of `gpumem serve-sim`: a text table with one column per policy
// (bytes in binary units) and one JSON document (schema in docs/serve.md).
#include <string>

#include <nlohmann/json.hpp>

#include "gpumem/serve/simulator.h"

namespace gpumem {

inline constexpr int kServeSchemaVersion = 1;

std::string render_serve_text(const serve::ServeSimulation& sim);
nlohmann::ordered_json serve_to_json(const serve::ServeSimulation& sim);

}  // namespace gpumem
