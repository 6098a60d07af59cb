#pragma once
// The settings that move what one inference needs the most, each with the
// figure it gives: what `gpumem inspect` advises after its report. Every
// figure is computed by analysing the model again under that setting, never
// extrapolated.
#include <cstdint>
#include <string>
#include <vector>

#include "gpumem/infer/inference_need.h"

namespace gpumem::infer {

struct InferenceLever {
  std::string setting;  // the flags that give it: "--dtype fp16", "--batch 2"
  std::string effect;   // what it changes, in words
  InferenceNeed need;   // what one inference then needs
};

// Levers for the model `base`, loaded and priced by `current`, whose need
// is `now`: half-precision floats (when the model has wider ones),
// int8 weights, and the first input dimension doubled (and halved, when
// above 1). Sorted by the bytes they save, most first. Settings that change
// nothing, or that fail to load, are left out.
std::vector<InferenceLever> inference_levers(const InspectResult& base, const InspectOptions& current,
                                             const InferenceNeed& now);

}  // namespace gpumem::infer
