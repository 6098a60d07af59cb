#pragma once
// Reports of `gpumem fit`: readable text and one JSON document (schema in
// docs/fit.md), and the files --emit writes.
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "gpumem/train/fit.h"

namespace gpumem {

// 2: the decision is on the device (predicted_peak_bytes is device_bytes:
// reserved peak + overhead), not on the allocated peak.
inline constexpr int kFitSchemaVersion = 2;

std::string render_fit_text(const train::FitResult& fit);
nlohmann::ordered_json fit_to_json(const train::FitResult& fit);

// What --emit KIND writes: its file name and contents. deepspeed: the
// ds_config.json of the lowest ZeRO stage that fits the budget (else the
// smallest per GPU); fsdp: a Python snippet, SHARD_GRAD_OP when it fits,
// else FULL_SHARD, wrapping units of the largest module's size.
std::pair<std::string, std::string> emitted_file(const train::FitResult& fit, const std::string& kind);

}  // namespace gpumem
