#pragma once
// Reports of `gpumem train`: readable text and one JSON document (schema in
// docs/train.md, "JSON: train").
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpumem/common/verdict.h"
#include "gpumem/train/device_memory.h"
#include "gpumem/train/training_step.h"

namespace gpumem {

inline constexpr int kTrainSchemaVersion = 1;

// {size, input, dimension (a name or an index), evidence, assumed}: the
// batch axis as train and fit report it.
nlohmann::ordered_json batch_axis_json(const BatchAxis& axis);

// The `top` largest allocations live at the peak, largest first.
std::vector<const train::Allocation*> largest_at_peak(const train::TrainingStep& s, int top);
// Those as text: a blank line, a heading and one line each; "" for none.
std::string render_largest_at_peak(const train::TrainingStep& s, int top);

// `device`: the step on the device (train::device_memory(step)).
// The step's settings in one line, as train, fit and finetune print them:
// "adamw, amp-bf16, loss cross-entropy, grads set to none, steady step,
// device cuda, for-loop, torch 1.13".
std::string step_settings(const train::TrainOptions& options);

// `verdict`: the least device memory the step runs in (train::least_device_bytes) against --gpu, if given.
std::string render_train_text(const train::TrainingStep& step, const train::DeviceMemory& device,
                              const Verdict& verdict, int top = 10);
nlohmann::ordered_json train_to_json(const train::TrainingStep& step, const train::DeviceMemory& device,
                                     const Verdict& verdict, int top = 10);

}  // namespace gpumem
