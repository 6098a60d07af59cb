#include "train/op_rules.h"

#include <algorithm>

#include "gpumem/model/dtype.h"

namespace gpumem::train {
namespace {

using Grad = OpRule::Grad;

const Value* value(const StepGraph& g, const Op& op, size_t i) {
  return i < op.inputs.size() && op.inputs[i] >= 0 ? &g.values[static_cast<size_t>(op.inputs[i])] : nullptr;
}

bool rg(const StepGraph& g, const Op& op, size_t i) {
  const Value* v = value(g, op, i);
  return v && v->requires_grad;
}

// Every input that requires grad gets a freshly computed gradient.
std::vector<Grad> allocated_grads(const StepGraph& g, const Op& op) {
  std::vector<Grad> grads(op.inputs.size(), Grad::kNone);
  for (size_t i = 0; i < op.inputs.size(); ++i) grads[i] = rg(g, op, i) ? Grad::kAllocated : Grad::kNone;
  return grads;
}

// Input 0 is differentiable, the others are not (sizes, axes, indices).
std::vector<Grad> first_input_grad(const StepGraph& g, const Op& op, Grad how) {
  std::vector<Grad> grads(op.inputs.size(), Grad::kNone);
  if (!grads.empty() && rg(g, op, 0)) grads[0] = how;
  return grads;
}

uint64_t float32_bytes(uint64_t elements) { return elements * 4; }

}  // namespace

uint64_t elements_of(const Value& v) {
  const int bits = dtype_bits(v.dtype);
  return bits > 0 ? v.bytes * 8 / static_cast<uint64_t>(bits) : 0;
}

OpRule rule_for(const Op& op, const StepGraph& g, Device device, bool input_dies) {
  OpRule r;
  const std::string& k = op.kind;
  const Value* x = value(g, op, 0);
  const uint64_t x_elements = x ? elements_of(*x) : 0;
  const Value* out = op.outputs.empty() || op.outputs[0] < 0 ? nullptr : &g.values[static_cast<size_t>(op.outputs[0])];
  const uint64_t out_elements = out ? elements_of(*out) : 0;

  if (is_view_op(k) || k == "Concat") {
    // A view's gradient is a view of the output's; cat's backward narrows it.
    r.source = k == "Concat" ? "derivatives.yaml: cat -> cat_tensors_backward (narrowed views)"
                             : "views (reshape, transpose, squeeze, slice): the gradient is a view";
    r.grads.assign(op.inputs.size(), Grad::kNone);
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      if (rg(g, op, i)) r.grads[i] = Grad::kPassThrough;
    }
    if (k != "Concat") r.grads.resize(std::min<size_t>(r.grads.size(), 1));
    r.grads.resize(op.inputs.size(), Grad::kNone);
    return r;
  }
  if (k == "convolution") {
    r.source = "derivatives.yaml: convolution -> convolution_backward(grad, input, weight)";
    r.saved_inputs = {0, 1};
    r.grads = allocated_grads(g, op);
    const Value* w = value(g, op, 1);
    const bool half = x && (x->dtype == DType::BFloat16 || x->dtype == DType::Float16);
    if (device == Device::kCpu && half && w && out && !w->dims.empty() && w->dims[0] > 0) {
      // Half-precision convolutions on CPU go through slow_conv2d
      // (thnn_conv2d) when oneDNN's bf16 kernels are not usable (they need
      // AVX-512): it unfolds the whole batch's input into one columns
      // buffer, N x (C_in/groups x kh x kw) x (H_out x W_out), beside the
      // output in forward, and again after the input's and the weight's
      // gradients in backward (recorded with torch 1.13 on a CPU without
      // AVX-512: resnet18, resnet50, vgg11_bn under bf16 autocast).
      const auto c_out = static_cast<uint64_t>(w->dims[0]);
      const uint64_t columns =
          out_elements / c_out * (elements_of(*w) / c_out) * (x->bytes / std::max<uint64_t>(x_elements, 1));
      r.extras = {{"slow_conv2d columns", columns, false}};
      r.backward_scratch = columns;
    } else if (device == Device::kCpu) {
      // oneDNN (mkldnn_convolution) reorders into its own buffers: forward,
      // the input and the weight, then an output it copies out; backward,
      // the output's gradient and the input for the weight's gradient, and
      // a weight gradient it copies out (recorded with torch 1.13).
      const uint64_t in = x ? x->bytes : 0, wb = w ? w->bytes : 0;
      const uint64_t o = out ? out->bytes : 0;
      r.extras = {{"oneDNN buffers", std::max(in + wb, o), false}};
      r.backward_scratch = std::max(o + in, wb);
    }
    return r;
  }
  if (k == "linear") {
    // addmm / mm: mat1's gradient needs mat2 (a parameter), mat2's needs mat1.
    r.source = "derivatives.yaml: addmm, mm -> mm_mat1_backward(grad, mat2), mm_mat2_backward(grad, mat1)";
    if (rg(g, op, 1)) r.saved_inputs.push_back(0);
    if (rg(g, op, 0)) r.saved_inputs.push_back(1);
    r.grads = allocated_grads(g, op);
    return r;
  }
  if (k == "MatMul" || k == "Mul") {
    r.source = k == "MatMul" ? "derivatives.yaml: bmm, matmul -> grad.bmm(mat2^T), self^T.bmm(grad)"
                             : "derivatives.yaml: mul -> mul_tensor_backward(grad, other), (grad, self)";
    if (rg(g, op, 1)) r.saved_inputs.push_back(0);
    if (rg(g, op, 0)) r.saved_inputs.push_back(1);
    r.grads = allocated_grads(g, op);
    if (k == "MatMul" && device == Device::kCpu && x && x->dtype == DType::BFloat16) {
      // oneDNN's bf16 batched matmul copies both operands (torch 1.13).
      const Value* y = value(g, op, 1);
      r.extras = {{"oneDNN operand copies", x->bytes + (y ? y->bytes : 0), false}};
    }
    return r;
  }
  if (k == "Div") {
    r.source =
        "derivatives.yaml: div.Tensor -> div_tensor_self_backward(grad, other), div_tensor_other_backward(grad, self, "
        "other)";
    if (rg(g, op, 0) || rg(g, op, 1)) r.saved_inputs.push_back(1);
    if (rg(g, op, 1)) r.saved_inputs.push_back(0);
    r.grads = allocated_grads(g, op);
    return r;
  }
  if (k == "Add" || k == "Sub") {
    // The gradient flows through unchanged (negated for Sub's other); a
    // broadcast input gets it summed to its shape.
    r.source = "derivatives.yaml: add, sub -> handle_r_to_c(grad), maybe_multiply(-grad, alpha)";
    r.grads.assign(op.inputs.size(), Grad::kNone);
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      if (!rg(g, op, i)) continue;
      const bool same_size = value(g, op, i)->bytes == (out ? out->bytes : 0);
      r.grads[i] = same_size && !(k == "Sub" && i == 1) ? Grad::kPassThrough : Grad::kAllocated;
    }
    return r;
  }
  if (k == "batch_norm") {
    // native_batch_norm keeps the input and its fp32 mean and inverse std
    // per channel; the running statistics are buffers updated in place.
    r.source =
        "derivatives.yaml: native_batch_norm -> batch_norm_backward(grad, input, weight, running_mean, running_var, "
        "result1, result2)";
    const Value* scale = value(g, op, 1);
    const uint64_t channels = scale ? elements_of(*scale) : 0;
    r.saved_inputs = {0};
    r.extras = {{"save_mean", float32_bytes(channels), op.needs_backward},
                {"save_invstd", float32_bytes(channels), op.needs_backward}};
    r.grads = allocated_grads(g, op);
    // The CPU kernel's backward computes into a temporary as large as the input.
    if (device == Device::kCpu) r.backward_scratch = x ? x->bytes : 0;
    for (size_t i = 3; i < r.grads.size(); ++i) r.grads[i] = Grad::kNone;
    return r;
  }
  if (k == "layer_norm") {
    r.source =
        "derivatives.yaml: native_layer_norm -> native_layer_norm_backward(grad, input, normalized_shape, result1, "
        "result2, weight, bias)";
    const Value* gamma = value(g, op, 1);
    const uint64_t row = gamma ? std::max<uint64_t>(elements_of(*gamma), 1) : 1;
    const uint64_t rows = x_elements / row;
    r.saved_inputs = {0};
    r.extras = {{"mean", float32_bytes(rows), op.needs_backward}, {"rstd", float32_bytes(rows), op.needs_backward}};
    r.grads = allocated_grads(g, op);
    return r;
  }
  if (k == "Relu" || k == "LeakyRelu" || k == "Elu") {
    // torchvision's blocks run these in place (ReLU(inplace=True)) on a
    // tensor nothing else reads; the result is what backward needs.
    r.source = "derivatives.yaml: relu_, leaky_relu_, elu_ -> threshold_backward(grad, result, 0) and kin";
    r.in_place = input_dies;
    r.saved_output = true;
    r.grads = first_input_grad(g, op, Grad::kAllocated);
    return r;
  }
  if (k == "Clip") {
    // ReLU6 (hardtanh_) in place: its backward reads the input it
    // overwrites, so autograd keeps a clone of it (recorded with torch 1.13).
    r.source =
        "derivatives.yaml: hardtanh_ -> hardtanh_backward(grad, self, min, max): self is cloned before it is "
        "overwritten";
    r.in_place = input_dies;
    if (r.in_place) {
      r.extras = {{"clone of " + (x ? x->name : std::string("input")), x ? x->bytes : 0, op.needs_backward}};
    } else {
      r.saved_inputs = {0};
    }
    r.grads = first_input_grad(g, op, Grad::kAllocated);
    return r;
  }
  // The ops a decoder's step graph (decoder_step.cpp) names as PyTorch
  // runs them, not as an ONNX export decomposes them.
  if (k == "rsqrt") {
    r.source = "derivatives.yaml: rsqrt -> -0.5 * grad * result.pow(3)";
    r.saved_output = true;
    r.grads = first_input_grad(g, op, Grad::kAllocated);
    return r;
  }
  if (k == "mean_keeping_input") {
    // torch 1.13's mean backward keeps its whole input (2.x keeps only its
    // sizes): RMSNorm's pow(2) output lives until backward
    // (tests/data/finetune shows it in every step).
    r.source = "derivatives.yaml (torch 1.13): mean.dim -> sum_backward(grad, self.sizes(), ...) / numel, self kept";
    r.saved_inputs = {0};
    r.grads = first_input_grad(g, op, Grad::kAllocated);
    return r;
  }
  if (k == "silu") {
    r.source = "derivatives.yaml: silu -> silu_backward(grad, self)";
    r.saved_inputs = {0};
    r.grads = first_input_grad(g, op, Grad::kAllocated);
    return r;
  }
  if (k == "clone") {
    // .contiguous() of a view, repeat_kv's expand-and-reshape, a slice made
    // contiguous: the gradient goes back through a view of it.
    r.source = "derivatives.yaml: clone -> grad";
    r.grads = first_input_grad(g, op, Grad::kPassThrough);
    return r;
  }
  if (k == "constant") {
    r.source = "a tensor made from sizes alone (the causal mask, zeros): no gradient";
    r.grads.assign(op.inputs.size(), Grad::kNone);
    return r;
  }
  if (k == "sdpa") {
    // Flash and memory-efficient attention keep q, k, v, the output and the
    // softmax's log-sum-exp per row (fp32), never the scores.
    r.source =
        "derivatives.yaml: _scaled_dot_product_flash_attention / _efficient_attention -> backward(grad, query, key, "
        "value, out, logsumexp, ...)";
    r.saved_inputs = {0, 1, 2};
    r.saved_output = true;
    const Value* q = x;
    const uint64_t rows =
        q && !q->dims.empty() && q->dims.back() > 0 ? elements_of(*q) / static_cast<uint64_t>(q->dims.back()) : 0;
    r.extras = {{"logsumexp", float32_bytes(rows), op.needs_backward}};
    r.grads = allocated_grads(g, op);
    return r;
  }
  if (k == "linear4bit") {
    // bitsandbytes' MatMul4Bit: the 4-bit weight is dequantized to the
    // compute type for the forward and again for the backward; only the
    // quantized weight is kept.
    r.source = "bitsandbytes autograd/_functions.py: MatMul4Bit (dequantize_4bit in forward and backward)";
    const Value* w = value(g, op, 1);
    const uint64_t dequantized = w && w->dims.size() == 2 ? static_cast<uint64_t>(w->dims[0] * w->dims[1]) * 2 : 0;
    r.extras = {{"dequantized weight", dequantized, false}};
    r.backward_scratch = dequantized;
    r.grads = first_input_grad(g, op, Grad::kAllocated);
    return r;
  }
  if (k == "topk") {
    // The indices are an output PyTorch keeps for backward; the graph's op
    // has the values as its one output and the indices here.
    r.source = "derivatives.yaml: topk -> value_selecting_reduction_backward(grad, dim, indices, ...)";
    r.extras = {{"indices", out_elements * 8, true}};
    r.grads = first_input_grad(g, op, Grad::kAllocated);
    return r;
  }
  if (k == "index_add") {
    // self.index_add_(dim, index, source): in place into self; source's
    // gradient is grad.index_select(dim, index).
    r.source = "derivatives.yaml: index_add -> grad, grad.index_select(dim, index)";
    r.in_place = true;
    r.saved_inputs = {1};
    r.grads.assign(op.inputs.size(), Grad::kNone);
    if (rg(g, op, 0)) r.grads[0] = Grad::kPassThrough;
    if (rg(g, op, 2)) r.grads[2] = Grad::kAllocated;
    return r;
  }
  if (k == "Sigmoid" || k == "Tanh" || k == "Exp" || k == "Sqrt" || k == "Softmax" || k == "LogSoftmax") {
    r.source = "derivatives.yaml: sigmoid, tanh, exp, sqrt, _softmax, _log_softmax -> backward from result";
    r.saved_output = true;
    r.grads = first_input_grad(g, op, Grad::kAllocated);
    return r;
  }
  if (k == "gelu" || k == "Erf" || k == "Log" || k == "Pow" || k == "Reciprocal" || k == "Neg" || k == "Abs" ||
      k == "HardSwish" || k == "HardSigmoid" || k == "Softplus" || k == "Sin" || k == "Cos") {
    r.source = "derivatives.yaml: gelu, erf, log, pow, reciprocal, abs, hardswish, softplus -> backward from self";
    if (k != "Neg") r.saved_inputs = {0};
    r.grads = first_input_grad(g, op, Grad::kAllocated);
    return r;
  }
  if (k == "Dropout") {
    // CUDA: native_dropout keeps a bool mask. CPU (torch 1.13 to 2.x):
    // dropout is input * (bernoulli noise / (1 - p)), and mul keeps the fp32
    // noise.
    r.source = device == Device::kCuda
                   ? "derivatives.yaml: native_dropout -> native_dropout_backward(grad, result1, scale)"
                   : "aten/src/ATen/native/Dropout.cpp: _dropout_impl -> input * noise; mul keeps noise";
    r.extras = {{device == Device::kCuda ? "dropout mask" : "dropout noise",
                 device == Device::kCuda ? x_elements : (x ? x->bytes : 0), op.needs_backward}};
    r.grads = first_input_grad(g, op, Grad::kAllocated);
    return r;
  }
  if (k == "GRU") {
    // nn.GRU on the CPU runs its cells as ATen ops (RNN.cpp's GRUCell over
    // time): the input gates for every step in one matmul, [T x B, 3H],
    // alive through the layer's forward; then per step the hidden gates,
    // [B, 3H], and four [B, H] tensors (the reset and update gates, the new
    // gate, 1 - z) kept for backward: T x B x 7H values per direction. The
    // layer's input is kept for the weights' gradient. Backward, step by
    // step, computes the recurrent weight's gradient for the step and adds it
    // to the running sum (two weight-sized temporaries beside the gradient)
    // while the hidden state's gradient for every step, [T x B, H], is
    // gathered. (Recorded with torch 2.10:
    // tests/data/onnx_rules/gru_*; on CUDA, cuDNN keeps its own reserve
    // space, not recorded: the CPU's figures are used, as an assumption.)
    r.known = device == Device::kCpu;
    r.source = device == Device::kCpu ? "aten/src/ATen/native/RNN.cpp: GRUCell over time (CPU)"
                                      : "cuDNN's RNN reserve space is not modelled: priced as the CPU's cells";
    const Value* w = value(g, op, 1);
    const Value* recurrent = value(g, op, 2);
    const uint64_t dirs = w && w->dims.size() == 3 ? static_cast<uint64_t>(w->dims[0]) : 1;
    const uint64_t hidden = w && w->dims.size() == 3 ? static_cast<uint64_t>(w->dims[1]) / 3 : 0;
    const uint64_t steps_batch = x && x->dims.size() == 3 ? x_elements / std::max<uint64_t>(x->dims[2], 1) : 0;
    const uint64_t width = x ? x->bytes / std::max<uint64_t>(x_elements, 1) : 4;
    r.saved_inputs = {0};
    r.extras = {{"input gates", steps_batch * 3 * hidden * dirs * width, false},
                {"gates per step", steps_batch * 7 * hidden * dirs * width, op.needs_backward}};
    // The export computes R from the parameters (gates reordered), so its
    // bytes are the parameter's: sized from its dims and type.
    uint64_t recurrent_bytes = 0;
    if (recurrent && recurrent->dims.size() == 3) {
      recurrent_bytes = static_cast<uint64_t>(recurrent->dims[0] * recurrent->dims[1] * recurrent->dims[2]) *
                        static_cast<uint64_t>(dtype_bits(recurrent->dtype) / 8);
    }
    // A bidirectional layer runs its directions one after the other (RNN.cpp
    // runs the reverse direction as a layer of its own): the temporaries
    // are one direction's.
    r.backward_scratch = (2 * recurrent_bytes + steps_batch * hidden * dirs * width) / std::max<uint64_t>(dirs, 1);
    r.grads = allocated_grads(g, op);
    for (size_t i = 4; i < r.grads.size(); ++i) r.grads[i] = Grad::kNone;  // lengths, initial state
    return r;
  }
  if (k == "MaxPool") {
    r.source =
        "derivatives.yaml: max_pool2d_with_indices -> max_pool2d_with_indices_backward(grad, self, ..., result1)";
    r.saved_inputs = {0};
    r.extras = {{"indices", out_elements * 8, op.needs_backward}};
    r.grads = first_input_grad(g, op, Grad::kAllocated);
    return r;
  }
  if (k == "GlobalAveragePool" || k == "AveragePool" || k == "ReduceMean" || k == "ReduceSum" || k == "Cast" ||
      k == "Pad" || k == "Tile" || k == "Resize" || (k == "Gather" && !rg(g, op, 0))) {
    // Resize is nn.Upsample / F.interpolate (nearest, bilinear...): its
    // backward needs the input's size and the scales, not the input.
    r.source =
        "derivatives.yaml: mean, sum, avg_pool2d, _to_copy, constant_pad_nd, repeat, upsample_* -> from sizes alone";
    r.grads = first_input_grad(g, op, Grad::kAllocated);
    return r;
  }
  if (k == "Gather") {
    // embedding(weight, indices) and index_select keep the indices.
    r.source = "derivatives.yaml: embedding -> embedding_backward(grad, indices, ...)";
    r.saved_inputs = {1};
    r.grads = first_input_grad(g, op, Grad::kAllocated);
    return r;
  }
  if (k == "Where") {
    r.source = "derivatives.yaml: where -> where(condition, grad, 0)";
    r.saved_inputs = {0};
    r.grads = allocated_grads(g, op);
    r.grads[0] = Grad::kNone;
    return r;
  }
  if (k == "nll_loss") {
    r.source =
        "derivatives.yaml: nll_loss_forward -> nll_loss_backward(grad, self, target, weight, reduction, ignore_index, "
        "total_weight)";
    r.saved_inputs = {1};
    r.extras = {{"total_weight", 4, op.needs_backward}};
    r.grads = first_input_grad(g, op, Grad::kAllocated);
    return r;
  }
  if (k == "mse_loss") {
    r.source = "derivatives.yaml: mse_loss -> mse_loss_backward(grad, self, target, reduction)";
    r.saved_inputs = {0, 1};
    r.grads = first_input_grad(g, op, Grad::kAllocated);
    return r;
  }
  // No rule: keep every input and the output, allocate every gradient.
  r.known = false;
  r.source = "no rule: assumed to keep all its inputs and its output, and to allocate a gradient per input";
  for (size_t i = 0; i < op.inputs.size(); ++i) r.saved_inputs.push_back(static_cast<int>(i));
  r.saved_output = true;
  r.grads = allocated_grads(g, op);
  return r;
}

}  // namespace gpumem::train
