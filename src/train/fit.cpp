#include "gpumem/train/fit.h"
#include "gpumem/common/flag_names.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpumem/common/error.h"
#include "gpumem/common/units.h"
#include "gpumem/model/onnx_loader.h"

namespace gpumem::train {
namespace {

// One way of running the step, judged on the device.
struct Candidate {
  TrainOptions options;
  TrainingStep step;
  DeviceMemory device;
  bool fits() const { return !device.runs_out; }
  uint64_t need() const { return device.device_bytes(); }
  // What the reports call "needs" (least_device_bytes): the figure a change
  // is shown with, the one train and the verdict give for the same step.
  uint64_t needs(uint64_t budget) const { return least_device_bytes(step, budget); }
};

Candidate evaluate(const Model& model, const TrainOptions& options, uint64_t budget) {
  Candidate c{options, predict_training_step(model, options), {}};
  c.device = device_memory(c.step, budget);
  return c;
}

// Checkpointing chosen on allocated bytes (plan_checkpointing), then judged
// on the device: the allocated target starts at the budget less the
// overhead and is lowered by what the allocator reserved beyond it, until
// the plan fits or the target cannot go lower. A plan that fits at the
// first target is optimal on the device too (any plan that fits there has
// its allocated peak within that target); later ones are not proven.
std::pair<CheckpointPlan, Candidate> checkpoint_on_device(const Model& model, const Candidate& current,
                                                          uint64_t budget) {
  const uint64_t overhead = current.device.overhead;
  CheckpointPlan best_plan;
  Candidate best = current;
  if (budget <= overhead) return {best_plan, best};
  uint64_t target = budget - overhead;
  for (int round = 0; round < 8; ++round) {
    CheckpointPlan plan = plan_checkpointing(model, current.options, target);
    // No modules: the step's allocated peak is within the target already
    // (the allocator's extra is what does not fit), or nothing can be
    // checkpointed.
    uint64_t need = current.need();
    if (!plan.modules.empty()) {
      Candidate c{current.options, plan.step, device_memory(plan.step, budget)};
      c.options.checkpoint = plan.modules;
      plan.optimal = plan.optimal && round == 0 && c.fits();
      const bool better = best_plan.modules.empty() || (c.fits() && !best.fits()) ||
                          (c.fits() == best.fits() &&
                           (c.fits() ? c.step.recompute_flops < best.step.recompute_flops : c.need() < best.need()));
      if (better) {
        best_plan = plan;
        best = c;
      }
      if (c.fits()) break;
      need = c.need();
    }
    if (!plan.fits) break;  // not even the allocated target is reached
    // What the allocator added on top of the allocated peak, at least a
    // 64th of the target, so that each round asks for a real change.
    const uint64_t excess = std::max(need > budget ? need - budget : 0, target / 64);
    const uint64_t allocated = std::min(target, plan.step.peak_bytes);
    if (excess >= allocated) break;
    target = allocated - excess;
  }
  best_plan.fits = best.fits();
  return {best_plan, best};
}

// One sentence on what keeps the closest step from fitting.
std::string why_it_does_not_fit(const Candidate& c, const FitRequest& request, int64_t batch) {
  std::vector<const char*> kept;
  for (Lever l : request.keep) kept.push_back(to_string(l));
  const std::string forbidden =
      kept.empty() ? "" : fmt::format(" (" GPUMEM_FLAG_KEEP " {} forbade those levers)", fmt::join(kept, ","));
  const uint64_t overhead = c.device.overhead;
  if (overhead >= request.budget) {
    return fmt::format("the overhead alone ({}, " GPUMEM_FLAG_OVERHEAD ") takes the whole budget",
                       format_bytes(overhead));
  }
  const uint64_t room = request.budget - overhead;
  const uint64_t states = c.step.static_estimate_bytes;
  if (states > room) {
    return fmt::format(
        "weights, gradients and optimizer states alone take {}, over the {} the budget leaves after the overhead: "
        "shard them over GPUs (" GPUMEM_FLAG_GPUS " N: ZeRO-3, FSDP FULL_SHARD) or offload them to the CPU{}",
        format_bytes(states), format_bytes(room), forbidden);
  }
  const uint64_t over = c.need() > request.budget ? c.need() - request.budget : 0;
  // On the CPU nothing is cached and there is no overhead to leave room for.
  const bool cpu = c.device.allocator.empty();
  return fmt::format(
      "weights, gradients and optimizer states take {} of the {} {}; with the activations at batch {}{} the step is "
      "{} over: a smaller batch (" GPUMEM_FLAG_MAX_BATCH " finds the largest){}",
      format_bytes(states), format_bytes(room), cpu ? "budget" : "left after the overhead", batch,
      cpu ? "" : " and the allocator's cache", format_bytes(over), forbidden);
}

// How much a strategy costs beyond data parallelism, as a rank (lower is
// cheaper) and in words. Communication per GPU per step, for P bytes of
// working weights: all-reduce of the gradients 2P (DDP; ZeRO-1/2 and
// SHARD_GRAD_OP move the same, reduce-scatter plus all-gather), 3P when
// the parameters are gathered in forward and again in backward (ZeRO-3,
// FULL_SHARD): Rajbhandari et al., "ZeRO", SC 2020, section 7.
// A rank is offloading first (none; the optimizer states; the parameters
// too), then communication (DDP's; the same volume; parameters gathered;
// pipeline stages): offloading costs the most, PCIe traffic every step and
// the optimizer step on the CPU.
constexpr int kCommunicationRanks = 4;
constexpr int kOffloadRank = kCommunicationRanks, kMaxRank = 3 * kCommunicationRanks - 1;

std::pair<int, std::string> sharding_cost(const ShardingPlan& p, uint64_t weight_bytes, int gpus) {
  const bool offload = p.zero.offload_optimizer || p.zero.offload_param;
  const bool gathers =
      (p.engine == "deepspeed" && p.zero.stage == 3) || (p.engine == "fsdp" && p.fsdp == FsdpSharding::kFullShard);
  std::string words;
  int rank = 0;
  if (p.engine == "pipeline") {
    rank = 3;  // a bubble, and the model cut into stages
    words =
        fmt::format("{} stages: activations sent between stages, a pipeline bubble of {} micro-batch slot(s) per step",
                    gpus, gpus - 1);
  } else {
    rank = gathers ? 2 : p.engine == "ddp" ? 0 : 1;
  }
  if (p.engine != "pipeline" && gpus > 1) {
    words =
        fmt::format("{} per GPU per step ({}P{})", format_bytes((gathers ? 3 : 2) * weight_bytes), gathers ? 3 : 2,
                    gathers ? ": parameters gathered in forward and in backward, 1.5x DDP's" : ", as DDP's all-reduce");
  }
  if (offload) {
    rank += (p.zero.offload_param ? 2 : 1) * kCommunicationRanks;
    words += std::string(words.empty() ? "" : "; ") +
             "the optimizer step on the CPU, gradients and parameters over PCIe every step";
  }
  return {rank, words};
}

// --gpus N when a replica per GPU does not fit: the cheapest strategy of
// rank at most max_rank that fits (lowest rank, then fewest bytes per GPU).
std::optional<ShardingPlan> cheapest_sharding(const std::vector<ShardingPlan>& plans, const FitRequest& request,
                                              uint64_t overhead, uint64_t weight_bytes, int max_rank) {
  std::optional<ShardingPlan> best;
  int best_rank = 0;
  for (const auto& p : plans) {
    if (p.gpu_bytes_per_gpu + overhead > request.budget) continue;
    const int rank = sharding_cost(p, weight_bytes, request.gpus).first;
    if (rank > max_rank) continue;
    if (!best || rank < best_rank || (rank == best_rank && p.gpu_bytes_per_gpu < best->gpu_bytes_per_gpu)) {
      best = p;
      best_rank = rank;
    }
  }
  return best;
}

FitChange checkpoint_change(const CheckpointPlan& plan, uint64_t before, uint64_t after) {
  return {fmt::format("checkpoint {} {}(s)", plan.modules.size(), has_runs(plan.modules) ? "segment" : "module"),
          before, after, fmt::format("recomputes {:.1f}% of a forward pass", 100 * plan.recompute_fraction)};
}

// When nothing else fits: the batch as several micro-batches with gradient
// accumulation, the largest micro-batch dividing it that fits (with its own
// checkpointing when needed). The gradients then live across the
// micro-steps, as when zero_grad runs only between optimizer steps.
// Replaces the changes made after `unchanged` (the step before
// checkpointing, its changes up to `kept_changes`) when it succeeds.
void micro_batches(const std::string& path, const FitRequest& request, const Candidate& unchanged, FitResult& r,
                   Candidate& current, size_t kept_changes) {
  const int64_t batch = r.batch;
  const bool batch_norm = std::find(unchanged.step.op_kinds.begin(), unchanged.step.op_kinds.end(), "batch_norm") !=
                          unchanged.step.op_kinds.end();
  for (int64_t steps = 2; steps <= batch; ++steps) {
    if (batch % steps != 0) continue;
    const int64_t micro = batch / steps;
    TrainOptions o = unchanged.options;
    o.checkpoint.clear();
    o.grads_set_to_none = false;
    o.model.load.batch = micro;
    std::optional<Candidate> c, plain;
    CheckpointPlan plan;
    try {
      const Model model = load_onnx_model(path, o.model.load);
      plain = c = evaluate(model, o, request.budget);
      if (!c->fits() && request.keep.count(Lever::kCheckpoint) == 0) {
        auto [p, checkpointed] = checkpoint_on_device(model, *c, request.budget);
        if (checkpointed.fits()) {
          plan = std::move(p);
          c = std::move(checkpointed);
        }
      }
    } catch (const InputError&) {
      return;  // a static export: its batch cannot change
    }
    if (!c->fits()) continue;
    r.changes.resize(kept_changes);
    r.changes.push_back(
        {fmt::format(GPUMEM_FLAG_BATCH " {} x {} steps", micro, steps), unchanged.needs(request.budget),
         plain->needs(request.budget),
         fmt::format("gradient accumulation: {} micro-batches of {} per optimizer step, the same batch of {}; smaller "
                     "kernels{}",
                     steps, micro, batch,
                     batch_norm ? fmt::format(", BatchNorm statistics over {} samples", micro) : "")});
    if (!plan.modules.empty())
      r.changes.push_back(checkpoint_change(plan, plain->needs(request.budget), c->needs(request.budget)));
    r.checkpoint = std::move(plan);
    r.batch = micro;
    r.accumulation_steps = steps;
    current = std::move(*c);
    return;
  }
}

// The changes for one batch, cheapest first and each only when allowed
// (--keep): the optimizer's and precision's, then, with --gpus, the
// strategies that move no more than DDP, checkpointing, the other
// strategies, micro-batches with gradient accumulation, and CPU offload.
// Each is judged by what the device holds (a strategy, by the engine's
// per-GPU figures).
FitResult fit_at(const std::string& path, const FitRequest& request, std::optional<int64_t> batch) {
  FitResult r;
  r.budget = request.budget;
  r.gpus = request.gpus;
  TrainOptions options = request.options;
  if (batch) options.model.load.batch = *batch;
  const Model model = load_onnx_model(path, options.model.load);
  r.batch = model.batch_axis.value;
  Candidate current = evaluate(model, options, request.budget);
  auto apply = [&](const std::string& change, const std::string& cost, auto&& modify) {
    if (current.fits()) return;
    TrainOptions next = current.options;
    modify(next);
    Candidate c = evaluate(model, next, request.budget);
    if (!c.fits() && c.need() >= current.need()) return;  // it does not help this model
    r.changes.push_back({change, current.needs(request.budget), c.needs(request.budget), cost});
    current = std::move(c);
  };
  const auto may = [&](Lever lever) { return request.keep.count(lever) == 0; };
  for (Lever l : {Lever::kOptimizer, Lever::kPrecision, Lever::kCheckpoint, Lever::kBatch, Lever::kOffload}) {
    if (may(l) && (l != Lever::kOffload || request.gpus > 1 || request.offload)) r.levers.push_back(l);
  }
  const bool foreach = current.options.foreach.value_or(current.options.device == Device::kCuda);
  if (may(Lever::kOptimizer) && foreach) {
    apply(GPUMEM_FLAG_FOREACH " off",
          "the for-loop optimizer: no temporaries over every parameter at once; one kernel per parameter, a "
          "slower step where parameters are many and small",
          [](TrainOptions& o) { o.foreach = false; });
  }
  if (may(Lever::kOptimizer) && !current.options.grads_set_to_none) {
    apply(GPUMEM_FLAG_GRADS " set-to-none",
          "zero_grad(set_to_none=True), PyTorch 2's default: gradients freed between steps",
          [](TrainOptions& o) { o.grads_set_to_none = true; });
  }
  if (may(Lever::kPrecision) && current.options.precision == Precision::kFp32) {
    apply(GPUMEM_FLAG_PRECISION " amp-bf16",
          "bf16 autocast: matmuls and convolutions in bfloat16, weights kept in fp32 (Ampere or newer; "
          "amp-fp16 with a loss scaler on older GPUs)",
          [](TrainOptions& o) { o.precision = Precision::kAmpBf16; });
  }
  if (may(Lever::kOptimizer) &&
      (current.options.optimizer == Optimizer::kAdam || current.options.optimizer == Optimizer::kAdamW ||
       current.options.optimizer == Optimizer::kAdamW32bit)) {
    apply(GPUMEM_FLAG_OPTIMIZER " adam8bit", "bitsandbytes' 8-bit Adam: states quantised blockwise",
          [](TrainOptions& o) { o.optimizer = Optimizer::kAdam8bit; });
  }
  // --gpus N: the strategies, judged on a step's model states and
  // activations. Those that move no more than DDP (ZeRO-1/2,
  // SHARD_GRAD_OP) come before checkpointing; the others after it, on the
  // step without checkpointing first, then with it.
  const Cluster cluster{request.gpus, 1};
  std::optional<ShardingPlan> chosen;
  uint64_t weight_bytes = 0;
  auto shard = [&](const TrainingStep& step, int max_rank, bool checkpointed) {
    // One GPU: only offloading changes what it holds (ZeRO-Offload).
    if (chosen || (request.gpus < 2 && (max_rank < kOffloadRank || !request.offload))) return;
    const ModelStates states = model_states_of(step);
    weight_bytes = states.parameters * states.weight_bytes_per_parameter;
    auto plans = sharding_plans(states, cluster);
    std::erase_if(plans, [&](const ShardingPlan& p) {
      const bool offload = p.zero.offload_optimizer || p.zero.offload_param;
      // Pipeline stages count what each layer keeps for backward, which a
      // checkpointed layer recomputes instead: not modelled together.
      return (checkpointed && p.engine == "pipeline") ||
             (offload && (!may(Lever::kOffload) || current.options.device != Device::kCuda)) ||
             (request.gpus < 2 && !offload);
    });
    chosen = cheapest_sharding(plans, request, current.device.overhead, weight_bytes, max_rank);
    if ((r.per_gpu.empty() && request.gpus > 1) || chosen) {
      r.per_gpu = std::move(plans);
      r.per_gpu_checkpointed = checkpointed;
    }
  };
  if (!current.fits()) shard(current.step, 1, false);
  const Candidate before_checkpoint = current;
  const size_t changes_before_checkpoint = r.changes.size();
  if (!chosen && may(Lever::kCheckpoint) && !current.fits()) {
    auto [plan, checkpointed] = checkpoint_on_device(model, current, request.budget);
    if (!plan.modules.empty() && (checkpointed.fits() || checkpointed.need() < current.need())) {
      r.changes.push_back(checkpoint_change(plan, current.needs(request.budget), checkpointed.needs(request.budget)));
      r.checkpoint = std::move(plan);
      current = std::move(checkpointed);
    }
  }
  // The strategies up to `max_rank`: on the step without checkpointing
  // (which is then dropped), else on the checkpointed one.
  auto strategies = [&](int max_rank) {
    if (chosen || current.fits()) return;
    shard(before_checkpoint.step, max_rank, false);
    if (chosen) {
      current = before_checkpoint;
      r.changes.resize(changes_before_checkpoint);
      r.checkpoint = {};
    } else if (!current.options.checkpoint.empty()) {
      shard(current.step, max_rank, true);
    }
  };
  strategies(kOffloadRank - 1);
  if (!chosen && !current.fits() && !request.max_batch && may(Lever::kBatch) && r.batch > 1) {
    micro_batches(path, request, before_checkpoint, r, current, changes_before_checkpoint);
  }
  strategies(kMaxRank);
  if (chosen) {
    const uint64_t per_gpu = chosen->gpu_bytes_per_gpu + current.device.overhead;
    r.changes.push_back(
        {request.gpus > 1 ? fmt::format(GPUMEM_FLAG_GPUS " {}: {} {}", request.gpus, chosen->engine, chosen->setting)
                          : fmt::format("{} {}", chosen->engine, chosen->setting),
         current.needs(request.budget), per_gpu, sharding_cost(*chosen, weight_bytes, request.gpus).second});
    r.sharding = std::move(chosen);
    r.options = current.options;
    r.device = current.device;
    r.predicted_peak = per_gpu;
    r.verdict = {request.budget, per_gpu};
    r.fits = true;
    r.step = std::move(current.step);
    return r;
  }
  if (request.gpus > 1 && r.per_gpu.empty()) shard(current.step, -1, !current.options.checkpoint.empty());
  if (!current.fits()) r.why_not = why_it_does_not_fit(current, request, r.batch);
  r.options = current.options;
  r.device = current.device;
  r.predicted_peak = current.need();
  r.fits = current.fits();
  r.step = std::move(current.step);
  r.verdict = {request.budget, least_device_bytes(r.step, request.budget)};
  return r;
}

}  // namespace

const char* to_string(Lever lever) {
  switch (lever) {
    case Lever::kOptimizer: return "optimizer";
    case Lever::kPrecision: return "precision";
    case Lever::kCheckpoint: return "checkpoint";
    case Lever::kBatch: return "batch";
    case Lever::kOffload: return "offload";
  }
  return "?";
}

std::optional<Lever> parse_lever(const std::string& name) {
  for (Lever l : {Lever::kOptimizer, Lever::kPrecision, Lever::kCheckpoint, Lever::kBatch, Lever::kOffload})
    if (name == to_string(l)) return l;
  return std::nullopt;
}

FitResult fit_training(const std::string& path, const FitRequest& request) {
  if (request.budget == 0) throw InputError("give the GPU's memory (the budget), e.g. 24GiB");
  if (!request.max_batch) return fit_at(path, request, std::nullopt);
  // The largest batch that fits: double until one does not, then bisect.
  // The peak grows with the batch, so the search finds the boundary.
  std::vector<FitAttempt> tried;
  std::optional<FitResult> failed;  // the last batch that did not fit
  auto attempt = [&](int64_t b) {
    FitResult r = fit_at(path, request, b);
    tried.push_back({b, r.fits, r.verdict.device_bytes});
    if (!r.fits) failed = r;
    return r;
  };
  FitResult best = attempt(1);
  if (!best.fits) {
    best.next_batch_peak = best.verdict.device_bytes;
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
  // The next batch's need, in the same terms as the verdict's.
  if (failed && failed->batch == lo + 1) best.next_batch_peak = failed->verdict.device_bytes;
  // The same boundary without checkpointing, for comparison.
  int64_t a = 0, b = lo + 1;
  while (b - a > 1) {
    const int64_t mid = a + (b - a) / 2;
    TrainOptions o = best.options;
    o.checkpoint.clear();
    o.model.load.batch = mid;
    const Model m = load_onnx_model(path, o.model.load);
    (evaluate(m, o, request.budget).fits() ? a : b) = mid;
  }
  best.max_batch_without_checkpointing = a;
  best.batches_tried = std::move(tried);
  return best;
}

}  // namespace gpumem::train
