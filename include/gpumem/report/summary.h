#pragma once
// What a report says, whichever form it takes: the verdict, what the memory
// is made of at the peak, and the changes that were made. The text report
// and the HTML page of train, fit, finetune and llm render these same rows,
// so the page cannot say something the text does not (issue 46: the
// finetune page had no verdict and no logits row).
#include <cstdint>
#include <string>
#include <vector>

#include "gpumem/common/verdict.h"
#include "gpumem/finetune/finetune_fit.h"
#include "gpumem/llm/llm_fit.h"
#include "gpumem/train/fit.h"
#include "gpumem/train/training_step.h"

namespace gpumem::report {

struct SummaryRow {
  std::string name;
  uint64_t bytes = 0;
  std::string meaning;
};

struct SummaryChange {
  std::string change;
  uint64_t before = 0;  // what the device must hold before and after it
  uint64_t after = 0;
  std::string cost;
};

struct Summary {
  Verdict verdict;                 // undecided without --gpu
  std::vector<std::string> notes;  // lines that go with the verdict
  std::string breakdown_title;     // what the rows add up to
  std::vector<SummaryRow> breakdown;
  std::string changes_title = "Changes";
  std::vector<SummaryChange> changes;
};

Summary train_summary(const train::TrainingStep& step, const Verdict& verdict);
Summary fit_summary(const train::FitResult& fit);
Summary finetune_summary(const finetune::FinetunePlan& plan);
Summary llm_summary(const llm::LlmPlan& plan);

}  // namespace gpumem::report
