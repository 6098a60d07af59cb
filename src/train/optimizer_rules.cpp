#include "train/optimizer_rules.h"

#include "train/op_rules.h"

namespace gpumem::train {
namespace {

// bitsandbytes keeps tensors under this many elements in 32 bits
// (min_8bit_size) and quantizes the rest blockwise, one fp32 absmax per
// block of 256 values.
constexpr uint64_t kMin8bitElements = 4096;
constexpr uint64_t k8bitBlock = 256;

}  // namespace

std::vector<StateTensor> optimizer_states(Optimizer optimizer, const Value& param) {
  const uint64_t bytes = param.bytes;
  const uint64_t elements = elements_of(param);
  switch (optimizer) {
    case Optimizer::kSgd: return {};
    case Optimizer::kSgdMomentum: return {{"momentum_buffer", bytes}};
    case Optimizer::kAdam:
    case Optimizer::kAdamW:
      // torch >= 1.12 keeps `step` as a 0-dim float32 tensor per parameter.
      return {{"exp_avg", bytes}, {"exp_avg_sq", bytes}, {"step", 4}};
    case Optimizer::kAdafactor: {
      // Factored second moment for matrices (row and column means, fp32),
      // the full one for vectors; no first moment (beta1 = None).
      if (param.dims.size() >= 2) {
        const uint64_t cols = static_cast<uint64_t>(param.dims.back());
        const uint64_t rows = cols > 0 ? elements / cols : 0;
        return {{"exp_avg_sq_row", rows * 4}, {"exp_avg_sq_col", cols * 4}, {"step", 4}};
      }
      return {{"exp_avg_sq", elements * 4}, {"step", 4}};
    }
    case Optimizer::kAdam8bit: {
      if (elements < kMin8bitElements) return {{"exp_avg", elements * 4}, {"exp_avg_sq", elements * 4}, {"step", 4}};
      const uint64_t absmax = (elements + k8bitBlock - 1) / k8bitBlock * 4;
      return {{"state1 (uint8)", elements}, {"absmax1", absmax}, {"state2 (uint8)", elements}, {"absmax2", absmax}};
    }
    case Optimizer::kAdamW32bit:
      // bitsandbytes Optimizer2State.init_state with optim_bits 32: state1 and
      // state2 in fp32 like the parameter, and a float32 step count on the
      // host (not a tensor). Its CUDA kernel updates in place: no temporaries
      // (for_loop_ and foreach_temporary_bytes give none).
      return {{"state1", elements * 4}, {"state2", elements * 4}};
  }
  return {};
}

uint64_t for_loop_temporary_bytes(Optimizer optimizer, const Value& param) {
  switch (optimizer) {
    case Optimizer::kAdam:
    case Optimizer::kAdamW:
      // denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
      return 2 * param.bytes;
    case Optimizer::kAdafactor:
      // grad ** 2 + eps, and the update before it is applied
      return 2 * elements_of(param) * 4;
    default: return 0;
  }
}

uint64_t lingering_temporary_bytes(Optimizer optimizer, const Value& param) {
  return optimizer == Optimizer::kAdam || optimizer == Optimizer::kAdamW ? param.bytes : 0;
}

uint64_t foreach_temporary_bytes(Optimizer optimizer, const std::vector<const Value*>& params, TorchVersion torch) {
  uint64_t total = 0;
  for (const Value* p : params) total += p->bytes;
  switch (optimizer) {
    case Optimizer::kAdam:
    case Optimizer::kAdamW:
      // exp_avg_sq_sqrt = torch._foreach_sqrt(exp_avg_sqs); then 1.13 and
      // 2.0 write denom = torch._foreach_add(exp_avg_sq_sqrt, eps), a new
      // list while the first lives (recorded: resnet18, AdamW, 1.13 on
      // CPU), where later releases add eps in place (_foreach_add_).
      return torch.before(2, 1) ? 2 * total : total;
    case Optimizer::kAdafactor: return 2 * total;
    default: return 0;
  }
}

}  // namespace gpumem::train
