#pragma once
// The figures every step carries, computed once from its allocations
// (their times set): the timeline, the peak with its phase and op, the
// breakdown at the peak, the steady-state and static figures, and the
// per-phase totals. A predicted step and a traced step are summarized by
// the same code, so their reports mean the same thing.
#include <string>
#include <vector>

#include "gpumem/train/training_step.h"

namespace gpumem::train {

// phase_of_time and op_of_time have one entry per step time (their size is
// the step's end time); every allocation lies within [0, end].
void summarize_step(TrainingStep& step, const std::vector<Phase>& phase_of_time,
                    const std::vector<std::string>& op_of_time);

}  // namespace gpumem::train
