#pragma once
// Reports of `gpumem serve-sim`: a text table with one column per policy
// (bytes in binary units) and one JSON document (schema in docs/serve.md).
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpumem/serve/simulator.h"

namespace gpumem {

inline constexpr int kServeSchemaVersion = 1;

std::string render_serve_text(const serve::ServeSimulation& sim);
// The comparison as rows (a measure, then one cell per policy): what the
// text and the page (serve-sim --html) both show.
std::vector<std::pair<std::string, std::vector<std::string>>> serve_rows(const serve::ServeSimulation& sim);
nlohmann::ordered_json serve_to_json(const serve::ServeSimulation& sim);

}  // namespace gpumem
