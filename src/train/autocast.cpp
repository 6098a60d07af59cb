#include "train/autocast.h"

#include <map>
#include <set>

#include "train/op_rules.h"

namespace gpumem::train {
namespace {

// torch.autocast's lower-precision ops (matmul, linear, bmm, conv...),
// and its fp32 ops: aten/src/ATen/autocast_mode.cpp, CUDA and CPU lists.
// scaled_dot_product_attention is in both lists since torch 2.1 (KERNEL_CUDA and
// KERNEL_CPU(scaled_dot_product_attention, lower_precision_fp)): q, k and v are
// cast and the output is low (the torch 2.x recordings, tests/data/torch2).
const std::set<std::string, std::less<>> kLowerPrecision = {"linear", "MatMul", "convolution", "Gemm", "sdpa"};
const std::set<std::string, std::less<>> kFp32Cuda = {"layer_norm", "Softmax",   "LogSoftmax", "Exp",      "Log",
                                                      "Pow",        "ReduceSum", "ReduceMean", "nll_loss", "mse_loss"};
const std::set<std::string, std::less<>> kFp32Cpu = {"layer_norm", "nll_loss", "mse_loss"};

void retype(Value& v, DType to) {
  const uint64_t elements = elements_of(v);
  v.dtype = to;
  v.bytes = elements * static_cast<uint64_t>(dtype_bits(to)) / 8;
}

}  // namespace

int insert_cast(StepGraph& g, int value, DType to, size_t at) {
  // A view of a parameter (a Linear's transposed weight) is cast whole.
  int source = value;
  while (g.values[static_cast<size_t>(source)].alias_of >= 0 && g.values[static_cast<size_t>(source)].bytes == 0) {
    source = g.values[static_cast<size_t>(source)].alias_of;
  }
  const Value& from = g.values[static_cast<size_t>(source)];
  Value c;
  c.name = "cast of " + from.name;
  c.dtype = from.dtype;
  c.bytes = from.bytes;
  c.dims = from.dims;
  c.requires_grad = from.requires_grad;
  retype(c, to);
  // `from` refers into g.values: done with it before the vector grows.
  const int id = static_cast<int>(g.values.size());
  Op cast{"Cast", "autocast: " + from.name, {value}, {id}, from.requires_grad};
  g.values.push_back(std::move(c));
  g.ops.insert(g.ops.begin() + static_cast<std::ptrdiff_t>(at), std::move(cast));
  return id;
}

void apply_autocast(StepGraph& g, Precision precision, Device device) {
  if (precision != Precision::kAmpFp16 && precision != Precision::kAmpBf16) return;
  const DType low = precision == Precision::kAmpFp16 ? DType::Float16 : DType::BFloat16;
  const auto& fp32_ops = device == Device::kCuda ? kFp32Cuda : kFp32Cpu;
  // Autocast caches the copy of each weight for the whole forward.
  std::map<int, int> weight_copy;
  auto root = [&](int v) {
    while (g.values[static_cast<size_t>(v)].alias_of >= 0) v = g.values[static_cast<size_t>(v)].alias_of;
    return v;
  };
  for (size_t k = 0; k < g.ops.size(); ++k) {
    const std::string kind = g.ops[k].kind;
    if (kind == "Cast" && g.ops[k].name.rfind("autocast: ", 0) == 0) continue;
    // Scalars and constants (a dropout ratio, a divisor) take part in no
    // type promotion, as PyTorch's 0-dim rule has it.
    auto floating_input = [&](int id) {
      if (id < 0) return false;
      const Value& v = g.values[static_cast<size_t>(id)];
      const Value& base = g.values[static_cast<size_t>(root(id))];
      return is_floating(v.dtype) && (base.parameter || elements_of(base) > 1);
    };
    DType computes = DType::Undefined;
    if (kind == "batch_norm") {
      // In no autocast list: it runs in its input's type, and cuDNN's and
      // the CPU's kernels take fp32 weight, bias and running statistics
      // with a half or bf16 input (PyTorch's mixed-type batch norm), so
      // nothing is cast and the output stays low.
      const int in = g.ops[k].inputs.empty() ? -1 : g.ops[k].inputs[0];
      if (floating_input(in)) computes = g.values[static_cast<size_t>(in)].dtype;
    } else if (kLowerPrecision.count(kind)) {
      computes = low;
    } else if (fp32_ops.count(kind)) {
      computes = DType::Float;
    } else {
      // The widest floating type among the inputs (type promotion).
      for (int id : g.ops[k].inputs) {
        if (!floating_input(id)) continue;
        const DType t = g.values[static_cast<size_t>(id)].dtype;
        if (computes == DType::Undefined || dtype_bits(t) > dtype_bits(computes)) computes = t;
      }
    }
    if (computes != DType::Undefined) {
      // Inputs of another type are copied first (weights once per forward).
      const size_t differentiable = kind == "batch_norm" ? 0 : kind == "layer_norm" ? 1 : g.ops[k].inputs.size();
      for (size_t i = 0; i < g.ops[k].inputs.size() && i < differentiable; ++i) {
        const int id = g.ops[k].inputs[i];
        if (!floating_input(id) || g.values[static_cast<size_t>(id)].dtype == computes) continue;
        const Value& v = g.values[static_cast<size_t>(root(id))];
        const bool weight = v.parameter;
        if (weight && weight_copy.count(root(id))) {
          g.ops[k].inputs[i] = weight_copy[root(id)];
          continue;
        }
        const int copy = insert_cast(g, id, computes, k);
        ++k;  // the op moved one place on
        if (weight) weight_copy[root(id)] = copy;
        g.ops[k].inputs[i] = copy;
      }
    }
    Op& op = g.ops[k];
    for (int o : op.outputs) {
      if (o < 0) continue;
      Value& v = g.values[static_cast<size_t>(o)];
      if (!is_floating(v.dtype) || v.alias_of >= 0) continue;
      const DType out = computes == DType::Undefined ? v.dtype : computes;
      retype(v, out);
    }
    // Views take their base's type.
    for (int o : op.outputs) {
      if (o < 0) continue;
      Value& v = g.values[static_cast<size_t>(o)];
      if (v.alias_of >= 0 && is_floating(v.dtype) && !g.values[static_cast<size_t>(root(o))].parameter) {
        retype(v, g.values[static_cast<size_t>(root(o))].dtype);
      }
    }
  }
}

}  // namespace gpumem::train
