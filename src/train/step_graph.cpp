#include "gpumem/train/step_graph.h"
#include "gpumem/common/flag_names.h"

#include <algorithm>
#include <optional>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "gpumem/common/error.h"

namespace gpumem::train {
namespace {

// Ops whose output is a view of their input in PyTorch.
const std::set<std::string, std::less<>> kViews = {"Reshape",   "Flatten", "Squeeze", "Unsqueeze", "Identity",
                                                   "Transpose", "Slice",   "Split",   "Expand"};

// Ops that produce no gradient for anything: shapes, indices, comparisons.
const std::set<std::string, std::less<>> kNotDifferentiable = {"Shape",
                                                               "Size",
                                                               "ConstantOfShape",
                                                               "Range",
                                                               "Equal",
                                                               "Less",
                                                               "Greater",
                                                               "LessOrEqual",
                                                               "GreaterOrEqual",
                                                               "Not",
                                                               "And",
                                                               "Or",
                                                               "Xor",
                                                               "ArgMax",
                                                               "ArgMin",
                                                               "NonZero",
                                                               "Floor",
                                                               "Ceil",
                                                               "Round",
                                                               "Sign",
                                                               "RandomNormalLike",
                                                               "RandomUniformLike",
                                                               "Bernoulli",
                                                               "OneHot",
                                                               "TopK"};

class Builder {
 public:
  Builder(const Graph& g, const MemoryAnalysis& m, const std::string& frozen, const std::string& file)
      : g_(g), m_(m), file_(file) {
    if (!frozen.empty()) {
      try {
        frozen_ = std::regex(frozen, std::regex::ECMAScript);
      } catch (const std::regex_error& e) {
        throw InputError(
            fmt::format(GPUMEM_FLAG_FROZEN " '{}': not a valid regular expression ({})", printable(frozen), e.what()));
      }
    }
    readers_.resize(g.tensors.size());
    for (size_t n = 0; n < g.nodes.size(); ++n) {
      for (int in : g.nodes[n].inputs) {
        if (in >= 0) readers_[static_cast<size_t>(in)].push_back(static_cast<int>(n));
      }
    }
  }

  StepGraph build() {
    make_values();
    std::vector<bool> done(g_.nodes.size(), false);
    for (size_t n = 0; n < g_.nodes.size(); ++n) {
      if (done[n] || folded(g_.nodes[n])) continue;
      if (!(fuse_gelu(n, done) || fuse_gated(n, done) || fuse_layer_norm(n, done) || fuse_linear(n, done))) plain(n);
      done[n] = true;
    }
    out_.graph_outputs = g_.outputs;
    propagate_requires_grad();
    return std::move(out_);
  }

 private:
  const Graph& g_;
  const MemoryAnalysis& m_;
  std::string file_;
  std::optional<std::regex> frozen_;
  std::vector<std::vector<int>> readers_;
  StepGraph out_;

  const Tensor& tensor(int id) const { return g_.tensors[static_cast<size_t>(id)]; }
  const Node& node(int n) const { return g_.nodes[static_cast<size_t>(n)]; }

  bool folded(const Node& n) const {
    return !n.outputs.empty() &&
           std::all_of(n.outputs.begin(), n.outputs.end(), [&](int id) { return id < 0 || tensor(id).weight; });
  }

  void make_values() {
    std::set<int> buffers;
    for (const auto& n : g_.nodes) {
      if (n.op_type == "BatchNormalization") {
        out_.has_batch_norm = true;
        for (size_t i = 3; i < n.inputs.size() && i < 5; ++i) buffers.insert(n.inputs[i]);
      }
    }
    out_.values.resize(g_.tensors.size());
    for (size_t id = 0; id < g_.tensors.size(); ++id) {
      const Tensor& t = g_.tensors[id];
      Value& v = out_.values[id];
      v.name = t.name;
      if (t.dims) {
        for (const auto& d : *t.dims) v.dims.push_back(d.value);
      }
      const bool weight = t.weight;
      // The batch is in the weights' type: fp32 under autocast (it casts
      // the copies its ops take), the model's type once it is cast whole.
      const auto as = weight || t.role == TensorRole::GraphInput ? m_.pricing.weights_as : m_.pricing.activations_as;
      const auto bytes = priced_bytes(t, as);
      if (!bytes && !weight) {
        throw InputError(fmt::format("{}: the size of '{}' {} is unknown; bind its dimensions with " GPUMEM_FLAG_DIM
                                     " NAME=VALUE "
                                     "or " GPUMEM_FLAG_BATCH " N",
                                     file_, printable(t.name), t.shape_string()));
      }
      v.bytes = bytes.value_or(0);
      v.dtype = priced_dtype(t, as);
      if (t.role == TensorRole::Initializer) {
        if (buffers.count(static_cast<int>(id))) {
          v.buffer = true;
        } else if (is_floating(t.dtype)) {
          v.parameter = true;
          v.trainable = !frozen_ || !std::regex_search(t.name, *frozen_);
          out_.parameters.push_back(static_cast<int>(id));
        } else {
          v.bytes = 0;  // shape constants: Python integers in PyTorch
        }
      } else if (t.role == TensorRole::GraphInput) {
        v.input = true;
      } else if (weight) {
        // Computed from weights alone: a view of a parameter (its transpose
        // for a Linear) or a constant PyTorch holds as a Python number.
        v.bytes = 0;
        const Node& p = node(t.producer);
        if (kViews.count(p.op_type) && !p.inputs.empty() && p.inputs[0] >= 0) {
          const int src = p.inputs[0];
          v.alias_of = out_.values[static_cast<size_t>(src)].alias_of >= 0
                           ? out_.values[static_cast<size_t>(src)].alias_of
                           : src;
        }
      }
    }
  }

  // The single reader of `id`, when it has exactly one and is not a graph output.
  std::optional<int> only_reader(int id) const {
    if (id < 0 || tensor(id).graph_output || readers_[static_cast<size_t>(id)].size() != 1) return std::nullopt;
    return readers_[static_cast<size_t>(id)].front();
  }

  bool is_weight(int id) const { return id >= 0 && tensor(id).weight; }

  // The non-weight input of a binary node whose other input is a weight.
  std::optional<int> activation_with_weight(const Node& n) const {
    if (n.inputs.size() != 2) return std::nullopt;
    if (is_weight(n.inputs[1]) && !is_weight(n.inputs[0])) return n.inputs[0];
    if (is_weight(n.inputs[0]) && !is_weight(n.inputs[1])) return n.inputs[1];
    return std::nullopt;
  }

  void emit(std::string kind, const Node& first, std::vector<int> inputs, std::vector<int> outputs) {
    out_.ops.push_back(Op{std::move(kind), first.name, std::move(inputs), std::move(outputs), false});
  }

  // GELU as torch 1.13 exports it: Div(x, sqrt 2) -> Erf -> Add 1 -> Mul x -> Mul 0.5.
  bool fuse_gelu(size_t n, std::vector<bool>& done) {
    const Node& div = node(static_cast<int>(n));
    if (div.op_type != "Div") return false;
    const auto x = activation_with_weight(div);
    if (!x || div.inputs[0] != *x) return false;
    const auto erf = only_reader(div.outputs[0]);
    if (!erf || node(*erf).op_type != "Erf") return false;
    const auto add = only_reader(node(*erf).outputs[0]);
    if (!add || node(*add).op_type != "Add" || !activation_with_weight(node(*add))) return false;
    const auto mul = only_reader(node(*add).outputs[0]);
    if (!mul || node(*mul).op_type != "Mul") return false;
    const auto& mi = node(*mul).inputs;
    if (std::find(mi.begin(), mi.end(), *x) == mi.end()) return false;
    const auto half = only_reader(node(*mul).outputs[0]);
    if (!half || node(*half).op_type != "Mul" || !activation_with_weight(node(*half))) return false;
    for (int k : {*erf, *add, *mul, *half}) done[static_cast<size_t>(k)] = true;
    emit("gelu", div, {*x}, {node(*half).outputs[0]});
    return true;
  }

  // x * gate(x) where the gate's output feeds only that Mul: SiLU exported as
  // Sigmoid then Mul (every opset torch 1.13 writes), Hardswish before opset
  // 14 as HardSigmoid then Mul. PyTorch runs nn.SiLU and nn.Hardswish as one
  // kernel that keeps only its input for backward; taken apart, the gate's
  // output would be kept too (efficientnet_b0 was +23%, issue 47). A Sigmoid
  // whose output is used elsewhere (a squeeze-excitation scale) is left.
  bool fuse_gated(size_t n, std::vector<bool>& done) {
    const Node& gate = node(static_cast<int>(n));
    const char* kind = gate.op_type == "Sigmoid" ? "silu" : gate.op_type == "HardSigmoid" ? "HardSwish" : nullptr;
    if (kind == nullptr || gate.inputs.empty() || gate.outputs.empty()) return false;
    const int x = gate.inputs[0];
    if (x < 0 || is_weight(x)) return false;
    const auto mul = only_reader(gate.outputs[0]);
    if (!mul || node(*mul).op_type != "Mul") return false;
    const auto& mi = node(*mul).inputs;
    if (mi.size() != 2 || !((mi[0] == x && mi[1] == gate.outputs[0]) || (mi[1] == x && mi[0] == gate.outputs[0])))
      return false;
    done[static_cast<size_t>(*mul)] = true;
    emit(kind, gate, {x}, {node(*mul).outputs[0]});
    return true;
  }

  // LayerNorm as exported before opset 17: ReduceMean, Sub, Pow, ReduceMean,
  // Add eps, Sqrt, Div, then Mul gamma and Add beta.
  bool fuse_layer_norm(size_t n, std::vector<bool>& done) {
    const Node& mean = node(static_cast<int>(n));
    if (mean.op_type != "ReduceMean" || mean.inputs.empty()) return false;
    const int x = mean.inputs[0];
    const auto sub = only_reader(mean.outputs[0]);
    if (!sub || node(*sub).op_type != "Sub" || node(*sub).inputs[0] != x) return false;
    // The centred value feeds Pow and Div.
    const auto& d_readers = readers_[static_cast<size_t>(node(*sub).outputs[0])];
    if (d_readers.size() != 2) return false;
    int pow = -1, div = -1;
    for (int r : d_readers) (node(r).op_type == "Pow" ? pow : div) = r;
    if (pow < 0 || div < 0 || node(div).op_type != "Div") return false;
    const auto var = only_reader(node(pow).outputs[0]);
    if (!var || node(*var).op_type != "ReduceMean") return false;
    const auto eps = only_reader(node(*var).outputs[0]);
    if (!eps || node(*eps).op_type != "Add") return false;
    const auto sqrt = only_reader(node(*eps).outputs[0]);
    if (!sqrt || node(*sqrt).op_type != "Sqrt" || node(div).inputs[1] != node(*sqrt).outputs[0]) return false;
    std::vector<int> pattern = {*sub, pow, *var, *eps, *sqrt, div};
    std::vector<int> inputs = {x};
    int result = node(div).outputs[0];
    for (const char* affine : {"Mul", "Add"}) {
      const auto next = only_reader(result);
      if (!next || node(*next).op_type != affine || !activation_with_weight(node(*next))) break;
      const auto& ins = node(*next).inputs;
      inputs.push_back(is_weight(ins[0]) ? ins[0] : ins[1]);
      pattern.push_back(*next);
      result = node(*next).outputs[0];
    }
    for (int k : pattern) done[static_cast<size_t>(k)] = true;
    emit("layer_norm", mean, std::move(inputs), {result});
    return true;
  }

  // MatMul by a weight, plus a bias Add when one follows: one addmm.
  bool fuse_linear(size_t n, std::vector<bool>& done) {
    const Node& mm = node(static_cast<int>(n));
    if (mm.op_type != "MatMul" || mm.inputs.size() != 2 || !is_weight(mm.inputs[1]) || is_weight(mm.inputs[0])) {
      return false;
    }
    std::vector<int> inputs = {mm.inputs[0], mm.inputs[1]};
    int result = mm.outputs[0];
    if (const auto bias = only_reader(result);
        bias && node(*bias).op_type == "Add" && activation_with_weight(node(*bias))) {
      const auto& ins = node(*bias).inputs;
      inputs.push_back(is_weight(ins[0]) ? ins[0] : ins[1]);
      done[static_cast<size_t>(*bias)] = true;
      result = node(*bias).outputs[0];
    }
    emit("linear", mm, std::move(inputs), {result});
    return true;
  }

  void plain(size_t n) {
    const Node& nd = node(static_cast<int>(n));
    std::string kind = nd.op_type;
    std::vector<int> outputs = nd.outputs;
    // A transposed convolution is the same aten::convolution (transposed=True):
    // it keeps its input and weight, and runs through the same kernels.
    if (kind == "Conv" || kind == "ConvTranspose") kind = "convolution";
    if (kind == "Gemm") kind = "linear";
    // Exports at opset 17 and 20 have these as single ops.
    if (kind == "LayerNormalization") {
      kind = "layer_norm";
      outputs.resize(1);
    }
    if (kind == "Gelu") kind = "gelu";
    if (kind == "BatchNormalization") {
      kind = "batch_norm";
      // Training mode exports the updated running statistics as outputs;
      // PyTorch updates its buffers in place.
      for (size_t i = 1; i < outputs.size(); ++i) {
        if (outputs[i] >= 0) out_.batch_statistics = true;
        if (outputs[i] >= 0 && i + 2 < nd.inputs.size()) {
          out_.values[static_cast<size_t>(outputs[i])].alias_of = nd.inputs[i + 2];
        }
      }
      outputs.resize(1);
    }
    if (kind == "Dropout") outputs.resize(1);  // the mask is the rule's, by device
    if (nd.passthrough) {
      kind = "Identity";  // ratio 0: PyTorch returns the input itself
      outputs.resize(1);
    }
    if (kind == "MaxPool") outputs.resize(1);  // indices: the rule's, int64
    if (kViews.count(kind)) {
      const int src = nd.inputs.empty() ? -1 : nd.inputs[0];
      for (int o : outputs) {
        if (o < 0 || src < 0) continue;
        Value& v = out_.values[static_cast<size_t>(o)];
        const Value& s = out_.values[static_cast<size_t>(src)];
        // Reshaping a transposed view copies it (PyTorch's .contiguous()).
        const bool copies = (kind == "Reshape" || kind == "Flatten") && !s.contiguous;
        if (!copies) v.alias_of = s.alias_of >= 0 ? s.alias_of : src;
        // A transpose, or a slice or split along an inner axis (attention's
        // packed q, k, v), leaves the memory out of order.
        v.contiguous = copies || (s.contiguous && kind != "Transpose" && kind != "Slice" && kind != "Split");
      }
    }
    emit(std::move(kind), nd, nd.inputs, std::move(outputs));
  }

  void propagate_requires_grad() {
    for (auto& v : out_.values) v.requires_grad = v.parameter && v.trainable;
    for (auto& v : out_.values) {
      if (v.alias_of >= 0 && out_.values[static_cast<size_t>(v.alias_of)].parameter) {
        v.requires_grad = out_.values[static_cast<size_t>(v.alias_of)].requires_grad;
      }
    }
    for (Op& op : out_.ops) {
      op.needs_backward = std::any_of(op.inputs.begin(), op.inputs.end(), [&](int id) {
        return id >= 0 && out_.values[static_cast<size_t>(id)].requires_grad;
      });
      const bool differentiable = !kNotDifferentiable.count(op.kind);
      for (int o : op.outputs) {
        if (o < 0) continue;
        Value& v = out_.values[static_cast<size_t>(o)];
        v.requires_grad = op.needs_backward && differentiable && is_floating(v.dtype);
      }
      if (!differentiable) op.needs_backward = false;
    }
  }
};

}  // namespace

bool is_view_op(const std::string& kind) { return kViews.count(kind) > 0; }

StepGraph build_step_graph(const Graph& graph, const MemoryAnalysis& analysis, const std::string& frozen,
                           const std::string& file) {
  return Builder(graph, analysis, frozen, file).build();
}

}  // namespace gpumem::train
