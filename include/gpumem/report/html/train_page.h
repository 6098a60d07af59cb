#pragma once
// The page of a predicted training step (`train --html`, `finetune --html`).
#include <string>

#include "gpumem/train/training_step.h"

namespace gpumem::report {

// A training step: live bytes stacked by what they are, across the phases.
std::string train_html(const train::TrainingStep& step);

}  // namespace gpumem::report
