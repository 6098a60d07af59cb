#pragma once
// The page of a predicted training step (`train`, `fit` and `finetune --html`)
// and of a language model served (`llm --html`).
#include <string>

#include "gpumem/llm/llm_fit.h"
#include "gpumem/report/summary.h"
#include "gpumem/train/training_step.h"

namespace gpumem::report {

// A training step: what its text report says (`summary`: train_summary,
// fit_summary or finetune_summary), then its live bytes stacked by what they
// are, across the phases.
std::string train_html(const train::TrainingStep& step, const Summary& summary);

// `llm --html`: what the text report says (llm_summary), the request and the
// engine.
std::string llm_html(const llm::LlmPlan& plan);

}  // namespace gpumem::report
