#include "gpumem/train/fit.h"

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/common/units.h"
#include "gpumem/model/onnx_loader.h"

namespace gpumem::train {
namespace {

// The first input dimension as loaded: what --batch sets.
int64_t batch_of(const Model& m) {
  for (int id : m.graph.inputs) {
    const Tensor& t = m.graph.tensors[static_cast<size_t>(id)];
    if (t.dims && !t.dims->empty() && t.dims->front().known()) return t.dims->front().value;
  }
  return 0;
}

// The changes for one batch: precision and optimizer first (when allowed),
// then checkpointing.
FitResult fit_at(const std::string& path, const FitRequest& request, std::optional<int64_t> batch) {
  FitResult r;
  r.budget = request.budget;
  r.options = request.options;
  if (batch) r.options.model.load.batch = *batch;
  const Model model = load_onnx_model(path, r.options.model.load);
  r.batch = batch_of(model);
  uint64_t peak = predict_training_step(model, r.options).peak_bytes;
  r.predicted_peak = peak;
  auto apply = [&](const std::string& change, const std::string& cost, auto&& modify) {
    if (peak <= request.budget) return;
    TrainOptions next = r.options;
    modify(next);
    const uint64_t after = predict_training_step(model, next).peak_bytes;
    if (after >= peak) return;  // it does not help this model
    r.changes.push_back({change, peak, after, cost});
    r.options = next;
    peak = after;
  };
  if (request.precision_auto && r.options.precision == Precision::kFp32) {
    apply("--precision amp-bf16", "bf16 autocast: matmuls and convolutions in bfloat16, weights kept in fp32",
          [](TrainOptions& o) { o.precision = Precision::kAmpBf16; });
  }
  if (request.precision_auto && (r.options.optimizer == Optimizer::kAdam || r.options.optimizer == Optimizer::kAdamW)) {
    apply("--optimizer adam8bit", "bitsandbytes' 8-bit Adam: states quantised blockwise",
          [](TrainOptions& o) { o.optimizer = Optimizer::kAdam8bit; });
  }
  r.predicted_peak = peak;
  if (peak > request.budget) {
    r.checkpoint = plan_checkpointing(model, r.options, request.budget);
    if (r.checkpoint.fits || r.checkpoint.peak_bytes < peak) {
      r.changes.push_back({fmt::format("checkpoint {} module(s)", r.checkpoint.modules.size()), peak,
                           r.checkpoint.peak_bytes,
                           fmt::format("recomputes {:.1f}% of a forward pass", 100 * r.checkpoint.recompute_fraction)});
      r.options.checkpoint = r.checkpoint.modules;
      peak = r.checkpoint.peak_bytes;
    }
  }
  r.predicted_peak = peak;
  r.fits = peak <= request.budget;
  if (request.gpus > 1) {
    TrainOptions sharded = r.options;
    sharded.checkpoint.clear();
    r.per_gpu = sharding_plans(model_states_of(predict_training_step(model, sharded)), Cluster{request.gpus, 1});
  }
  return r;
}

}  // namespace

FitResult fit_training(const std::string& path, const FitRequest& request) {
  if (request.budget == 0) throw InputError("--budget: give the memory available, e.g. 24GiB");
  if (!request.max_batch) return fit_at(path, request, std::nullopt);
  // The largest batch that fits: double until one does not, then bisect.
  // The peak grows with the batch, so the search finds the boundary.
  std::vector<FitAttempt> tried;
  auto attempt = [&](int64_t b) {
    FitResult r = fit_at(path, request, b);
    tried.push_back({b, r.fits, r.predicted_peak});
    return r;
  };
  FitResult best = attempt(1);
  if (!best.fits) {
    best.next_batch_peak = best.predicted_peak;
    best.batches_tried = std::move(tried);
    return best;
  }
  constexpr int64_t kLimit = int64_t{1} << 20;
  int64_t lo = 1, hi = 2;
  while (hi <= kLimit) {
    FitResult r = attempt(hi);
    if (!r.fits) break;
    best = std::move(r);
    lo = hi;
    hi *= 2;
  }
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    FitResult r = attempt(mid);
    if (r.fits) {
      best = std::move(r);
      lo = mid;
    } else {
      hi = mid;
    }
  }
  for (const auto& t : tried) {
    if (t.batch == lo + 1) best.next_batch_peak = t.peak_bytes;
  }
  // The same boundary without checkpointing, for comparison.
  int64_t a = 0, b = lo + 1;
  while (b - a > 1) {
    const int64_t mid = a + (b - a) / 2;
    TrainOptions o = best.options;
    o.checkpoint.clear();
    o.model.load.batch = mid;
    const Model m = load_onnx_model(path, o.model.load);
    (predict_training_step(m, o).peak_bytes <= request.budget ? a : b) = mid;
  }
  best.max_batch_without_checkpointing = a;
  best.batches_tried = std::move(tried);
  return best;
}

}  // namespace gpumem::train
