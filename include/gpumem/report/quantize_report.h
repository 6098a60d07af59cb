#pragma once
// Reports of `gpumem quantize`: readable text and one JSON document (schema
// in docs/quantize.md).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpumem/weights/quantize_file.h"

namespace gpumem {

inline constexpr int kQuantizeSchemaVersion = 1;

// Bits per weight of the output's tensor data: its bytes x 8 over all values.
double bits_per_weight(const weights::QuantizeReport& report);

std::string render_quantize_text(const weights::QuantizeReport& report);
// One row per tensor (before, after, from, to, rmse, max abs, the tensor
// and why): what the text and the page (quantize --html) both show.
std::vector<std::vector<std::string>> quantize_rows(const weights::QuantizeReport& report);
nlohmann::ordered_json quantize_to_json(const weights::QuantizeReport& report);

}  // namespace gpumem
