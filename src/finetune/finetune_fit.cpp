// The answers around a fine-tuning step: fits, the longest sequence and
// largest micro-batch, and single changes that would fit.
#include "gpumem/finetune/finetune_fit.h"
#include "gpumem/common/flag_names.h"

#include <algorithm>
#include <functional>

#include <fmt/format.h>

#include "gpumem/common/units.h"

namespace gpumem::finetune {

const char* to_string(Strategy s) {
  switch (s) {
    case Strategy::kDdp: return "ddp";
    case Strategy::kZero1: return "zero1";
    case Strategy::kZero2: return "zero2";
    case Strategy::kZero3: return "zero3";
    case Strategy::kFsdp: return "fsdp";
  }
  return "?";
}

PerGpu per_gpu(const llm::LlmModel& model, const FinetuneStep& step, const FinetuneParallel& parallel) {
  const uint64_t n = static_cast<uint64_t>(std::max(parallel.gpus, 1));
  const uint64_t layers = std::max<uint32_t>(model.n_layer, 1);
  train::ModelStates states = train::model_states(step.step, step.trainable_parameters / layers);
  train::Cluster cluster;
  cluster.gpus_per_node = static_cast<int>(n);
  PerGpu out;
  out.gpus = static_cast<int>(n);
  const bool sharded = parallel.strategy == Strategy::kZero3 || parallel.strategy == Strategy::kFsdp;
  switch (parallel.strategy) {
    case Strategy::kDdp: out.plan = train::ddp_plan(states, cluster); break;
    case Strategy::kZero1:
    case Strategy::kZero2:
    case Strategy::kZero3: {
      train::ZeroSetting zero;
      zero.stage = parallel.strategy == Strategy::kZero1 ? 1 : parallel.strategy == Strategy::kZero2 ? 2 : 3;
      zero.offload_optimizer = parallel.offload;
      out.plan = train::zero_plan(states, cluster, zero);
      break;
    }
    case Strategy::kFsdp: out.plan = train::fsdp_plan(states, cluster, train::FsdpSharding::kFullShard); break;
  }
  out.frozen_bytes =
      sharded ? div_up(step.frozen_weight_bytes, n) + step.frozen_weight_bytes / layers : step.frozen_weight_bytes;
  out.overhead_bytes = train::step_overhead(step.step.options);
  out.device_bytes = out.plan.gpu_bytes_per_gpu + out.frozen_bytes + out.overhead_bytes;
  return out;
}

namespace {

struct Evaluated {
  FinetuneStep step;
  train::DeviceMemory device;
  bool fits = false;
};

bool fits_on(const train::DeviceMemory& device, uint64_t gpu) {
  return gpu != 0 && !device.runs_out && device.device_bytes() <= gpu;
}

Evaluated evaluate(const llm::LlmModel& model, const FinetuneOptions& options, uint64_t gpu) {
  Evaluated e;
  e.step = predict_finetune(model, options);
  e.device = train::device_memory(e.step.step, gpu);
  e.fits = fits_on(e.device, gpu);
  return e;
}

// Whether it fits, for the searches: what is allocated already exceeds the
// GPU less the overhead without replaying the allocator (reserved is at
// least allocated).
bool fits(const llm::LlmModel& model, const FinetuneOptions& options, uint64_t gpu, const FinetuneParallel& parallel) {
  const FinetuneStep step = predict_finetune(model, options);
  if (parallel.gpus > 1) return per_gpu(model, step, parallel).device_bytes <= gpu;
  if (step.step.peak_bytes + train::step_overhead(step.step.options) > gpu) return false;
  return fits_on(train::device_memory(step.step, gpu), gpu);
}

// The largest x in [lo, hi] with ok(x), given ok is monotone; nullopt
// when not even lo fits.
std::optional<uint64_t> largest(uint64_t lo, uint64_t hi, const std::function<bool(uint64_t)>& ok) {
  if (lo > hi || !ok(lo)) return std::nullopt;
  // Grow by doubling first: most answers are far below hi.
  uint64_t good = lo, bad = hi + 1;
  for (uint64_t x = std::max<uint64_t>(lo * 2, lo + 1); x <= hi; x *= 2) {
    if (!ok(x)) {
      bad = x;
      break;
    }
    good = x;
  }
  if (bad == hi + 1 && good < hi && ok(hi)) return hi;
  while (bad - good > 1) {
    const uint64_t mid = good + (bad - good) / 2;
    (ok(mid) ? good : bad) = mid;
  }
  return good;
}

}  // namespace

FinetunePlan plan_finetune(const llm::LlmModel& model, const FinetuneOptions& options, uint64_t gpu_bytes,
                           bool find_max_seq, bool find_max_batch, const FinetuneParallel& parallel) {
  FinetunePlan plan;
  Evaluated e = evaluate(model, options, gpu_bytes);
  plan.step = std::move(e.step);
  plan.device = e.device;
  plan.gpu_bytes = gpu_bytes;
  if (parallel.gpus > 1) {
    plan.per_gpu = per_gpu(model, plan.step, parallel);
    plan.verdict = {gpu_bytes, plan.per_gpu->device_bytes};
  } else {
    // What `gpumem train` and `fit` call needs: the least device the step runs in.
    plan.verdict = {gpu_bytes, train::least_device_bytes(plan.step.step, gpu_bytes)};
  }
  if (gpu_bytes == 0) return plan;

  if (find_max_seq) {
    const uint64_t cap = model.n_ctx_train != 0 ? model.n_ctx_train : uint64_t{1} << 20;
    plan.max_seq = largest(2, cap, [&](uint64_t seq) {
      FinetuneOptions o = options;
      o.seq = seq;
      return fits(model, o, gpu_bytes, parallel);
    });
    plan.max_seq_capped = plan.max_seq && *plan.max_seq == cap;
  }
  if (find_max_batch) {
    plan.max_micro_batch = largest(1, 4096, [&](uint64_t b) {
      FinetuneOptions o = options;
      o.micro_batch = b;
      return fits(model, o, gpu_bytes, parallel);
    });
  }
  if (plan.verdict.fits()) return plan;

  // One change at a time, in the order a practitioner reaches for them.
  struct Candidate {
    std::string what, cost;
    std::function<bool(FinetuneOptions&)> apply;  // false: does not apply
  };
  const std::vector<Candidate> candidates = {
      {GPUMEM_FLAG_CHECKPOINT " layers", "each layer's forward runs again in backward (about a third more compute)",
       [](FinetuneOptions& o) {
         if (o.checkpointing) return false;
         o.checkpointing = true;
         return true;
       }},
      {GPUMEM_FLAG_ATTENTION " sdpa", "none: a fused kernel instead of the [b, heads, s, s] scores",
       [](FinetuneOptions& o) {
         if (o.attention != Attention::kEager) return false;
         o.attention = Attention::kSdpa;
         return true;
       }},
      {GPUMEM_FLAG_BATCH " half, " GPUMEM_FLAG_GRAD_ACCUM " double", "the same effective batch in twice the steps",
       [](FinetuneOptions& o) {
         if (o.micro_batch < 2) return false;
         o.micro_batch /= 2;
         o.grad_accum *= 2;
         return true;
       }},
      {GPUMEM_FLAG_METHOD " qlora", "4-bit base weights: dequantized every step, a small loss of quality",
       [](FinetuneOptions& o) {
         if (o.method != FinetuneMethod::kLora) return false;
         o.method = FinetuneMethod::kQlora;
         return true;
       }},
      {GPUMEM_FLAG_METHOD " lora", "adapters only: the base weights stay as they are",
       [](FinetuneOptions& o) {
         if (o.method != FinetuneMethod::kFull && o.method != FinetuneMethod::kFreeze) return false;
         o.method = FinetuneMethod::kLora;
         return true;
       }},
      {GPUMEM_FLAG_OPTIMIZER " adam8bit", "8-bit optimizer states (bitsandbytes)",
       [](FinetuneOptions& o) {
         if (o.train.optimizer != train::Optimizer::kAdamW && o.train.optimizer != train::Optimizer::kAdam &&
             o.train.optimizer != train::Optimizer::kAdamW32bit)
           return false;
         o.train.optimizer = train::Optimizer::kAdam8bit;
         return true;
       }},
      {GPUMEM_FLAG_PRECISION " bf16", "bf16 weights and activations, no fp32 master copy",
       [](FinetuneOptions& o) {
         if (o.train.precision == train::Precision::kBf16) return false;
         o.train.precision = train::Precision::kBf16;
         return true;
       }},
  };
  for (const auto& c : candidates) {
    FinetuneOptions o = options;
    if (!c.apply(o)) continue;
    const Evaluated changed = evaluate(model, o, gpu_bytes);
    if (parallel.gpus > 1) {
      const uint64_t device = per_gpu(model, changed.step, parallel).device_bytes;
      plan.changes.push_back({c.what, c.cost, device, device <= gpu_bytes});
      continue;
    }
    plan.changes.push_back({c.what, c.cost, changed.device.device_bytes(), changed.fits});
  }
  // On one GPU, more GPUs under ZeRO-3 (the engine shards everything).
  if (parallel.gpus <= 1) {
    for (const int gpus : {2, 4, 8}) {
      FinetuneParallel more;
      more.gpus = gpus;
      more.strategy = Strategy::kZero3;
      const uint64_t device = per_gpu(model, plan.step, more).device_bytes;
      plan.changes.push_back({fmt::format(GPUMEM_FLAG_GPUS " {} " GPUMEM_FLAG_STRATEGY " zero3", gpus),
                              "more GPUs, the model sharded over them", device, device <= gpu_bytes});
      if (device <= gpu_bytes) break;  // the fewest GPUs that fit
    }
  }
  // Over several GPUs, the engine's sharding is a lever too.
  if (parallel.gpus > 1) {
    const std::pair<Strategy, const char*> shardings[] = {{Strategy::kZero2, GPUMEM_FLAG_STRATEGY " zero2"},
                                                          {Strategy::kZero3, GPUMEM_FLAG_STRATEGY " zero3"},
                                                          {Strategy::kFsdp, GPUMEM_FLAG_STRATEGY " fsdp"}};
    for (const auto& [strategy, what] : shardings) {
      if (strategy == parallel.strategy) continue;
      FinetuneParallel other = parallel;
      other.strategy = strategy;
      const uint64_t device = per_gpu(model, plan.step, other).device_bytes;
      plan.changes.push_back({what, "more communication per step", device, device <= gpu_bytes});
    }
    if (parallel.strategy != Strategy::kDdp && parallel.strategy != Strategy::kFsdp && !parallel.offload) {
      FinetuneParallel other = parallel;
      other.offload = true;
      const uint64_t device = per_gpu(model, plan.step, other).device_bytes;
      plan.changes.push_back({GPUMEM_FLAG_OFFLOAD, "optimizer states in CPU memory: the update runs on the CPU", device,
                              device <= gpu_bytes});
    }
  }
  std::stable_sort(plan.changes.begin(), plan.changes.end(),
                   [](const FinetuneChange& a, const FinetuneChange& b) { return a.fits && !b.fits; });
  return plan;
}

}  // namespace gpumem::finetune
