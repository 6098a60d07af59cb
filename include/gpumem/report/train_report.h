#pragma once
// Reports of `gpumem train`: readable text and one JSON document (schema in
// docs/train.md, "JSON: train").
#include <string>

#include <nlohmann/json.hpp>

#include "gpumem/train/device_memory.h"
#include "gpumem/train/training_step.h"

namespace gpumem {

inline constexpr int kTrainSchemaVersion = 1;

// {size, input, dimension (a name or an index), evidence, assumed}: the
// batch axis as train and fit report it.
nlohmann::ordered_json batch_axis_json(const BatchAxis& axis);

// `device`: the step on the device (train::device_memory(step)).
std::string render_train_text(const train::TrainingStep& step, const train::DeviceMemory& device, int top = 10);
nlohmann::ordered_json train_to_json(const train::TrainingStep& step, const train::DeviceMemory& device, int top = 10);

}  // namespace gpumem
