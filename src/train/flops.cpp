#include "train/flops.h"

#include "train/op_rules.h"

namespace gpumem::train {
namespace {

uint64_t elements(const StepGraph& g, int id) { return id >= 0 ? elements_of(g.values[static_cast<size_t>(id)]) : 0; }

// A weight's elements, following a view (a Linear's transposed weight) to
// the parameter that holds them.
uint64_t weight_elements(const StepGraph& g, int id) {
  if (id < 0) return 0;
  while (g.values[static_cast<size_t>(id)].bytes == 0 && g.values[static_cast<size_t>(id)].alias_of >= 0) {
    id = g.values[static_cast<size_t>(id)].alias_of;
  }
  return elements_of(g.values[static_cast<size_t>(id)]);
}

}  // namespace

uint64_t forward_flops(const Op& op, const StepGraph& g) {
  const std::string& k = op.kind;
  const int in = op.inputs.empty() ? -1 : op.inputs[0];
  const int out = op.outputs.empty() ? -1 : op.outputs[0];
  const uint64_t out_elements = elements(g, out);
  if (is_view_op(k)) return 0;
  if (k == "convolution") {
    // Weight [C_out, C_in / groups, kH, kW]: each output element sums
    // C_in / groups x kH x kW products.
    const Value* w = op.inputs.size() > 1 && op.inputs[1] >= 0 ? &g.values[static_cast<size_t>(op.inputs[1])] : nullptr;
    const uint64_t c_out = w && !w->dims.empty() && w->dims[0] > 0 ? static_cast<uint64_t>(w->dims[0]) : 1;
    return 2 * out_elements * (weight_elements(g, op.inputs.size() > 1 ? op.inputs[1] : -1) / c_out);
  }
  if (k == "linear" || k == "MatMul") {
    const Value* a = in >= 0 ? &g.values[static_cast<size_t>(in)] : nullptr;
    const uint64_t inner = a && !a->dims.empty() && a->dims.back() > 0 ? static_cast<uint64_t>(a->dims.back()) : 1;
    return 2 * out_elements * inner;
  }
  if (k == "batch_norm" || k == "layer_norm" || k == "Softmax" || k == "LogSoftmax") return 5 * out_elements;
  if (k == "gelu") return 8 * out_elements;
  if (k == "MaxPool" || k == "AveragePool") {
    const uint64_t in_elements = elements(g, in);
    return out_elements > 0 ? in_elements : 0;  // each input element is visited about once per window it is in
  }
  if (k == "GlobalAveragePool" || k == "ReduceMean" || k == "ReduceSum") return elements(g, in);
  return out_elements;
}

}  // namespace gpumem::train
