#include "gpumem/report/summary.h"

#include <algorithm>

namespace gpumem::report {
namespace {

std::vector<SummaryRow> categories(const train::TrainingStep& step) {
  std::vector<SummaryRow> rows;
  for (int c = 0; c < train::kCategories; ++c)
    rows.push_back({train::to_string(static_cast<train::Category>(c)), step.breakdown[c], ""});
  return rows;
}

}  // namespace

Summary train_summary(const train::TrainingStep& step, const Verdict& verdict) {
  Summary s;
  s.verdict = verdict;
  s.breakdown_title = "Allocated at the peak (max_memory_allocated)";
  s.breakdown = categories(step);
  return s;
}

Summary fit_summary(const train::FitResult& fit) {
  Summary s = train_summary(fit.step, fit.verdict);
  for (const auto& c : fit.changes) s.changes.push_back({c.change, c.peak_before, c.peak_after, c.cost});
  return s;
}

Summary finetune_summary(const finetune::FinetunePlan& p) {
  Summary s;
  s.verdict = p.verdict;
  s.breakdown_title = "Allocated at the peak (max_memory_allocated)";
  const auto& f = p.step;
  const auto at = [&](train::Category c) { return f.step.breakdown[static_cast<int>(c)]; };
  const uint64_t weights = at(train::Category::kWeights);
  const uint64_t trainable = std::min(weights, f.trainable_weight_bytes);
  s.breakdown = {
      {"frozen_weights", weights - trainable, "frozen weights at their storage type"},
      {"trainable_weights", trainable, "the parameters the optimizer updates"},
      {"gradients", at(train::Category::kGradients), "their gradients"},
      {"optimizer_states", at(train::Category::kOptimizerStates), "the optimizer's states"},
      {"inputs", at(train::Category::kInputs), "token ids and labels"},
      {"saved_activations", at(train::Category::kSavedActivations) - f.logits_saved_bytes,
       "what autograd keeps for backward"},
      {"logits", f.logits_saved_bytes + f.logits_transient_bytes,
       "logits, their fp32 copy, log-softmax and their gradients"},
      {"transient", at(train::Category::kTransient) - f.logits_transient_bytes,
       "outputs not kept, gradients in flight"},
  };
  s.changes_title = "Single changes";
  for (const auto& c : p.changes) s.changes.push_back({c.what, p.verdict.device_bytes, c.device_bytes, c.cost});
  return s;
}

Summary llm_summary(const llm::LlmPlan& p) {
  Summary s;
  s.verdict = p.verdict;
  s.breakdown_title = p.request.gpus == 1 ? "On the GPU" : "On the fullest GPU";
  const auto& g = p.placed;
  s.breakdown = {{"weights", g.weights_bytes, "the layers and the output layer"},
                 {"kv_cache", g.kv_bytes, "keys and values of every cached token"},
                 {"activations", g.activation_bytes, "one forward's peak"},
                 {"overhead", g.overhead_bytes, "CUDA context and runtime"}};
  if (g.other_bytes) s.breakdown.push_back({"staging", g.other_bytes, "streamed layers' buffers"});
  s.changes_title = "Quantization levels, every layer on the GPU";
  for (const auto& q : p.quant_levels)
    s.changes.push_back({q.quant, p.verdict.device_bytes, q.verdict.device_bytes,
                         q.verdict.fits() ? "fits" : "does not fit"});
  return s;
}

}  // namespace gpumem::report
