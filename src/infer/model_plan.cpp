#include "gpumem/infer/model_plan.h"
#include "gpumem/common/flag_names.h"

#include <algorithm>
#include <array>
#include <numeric>

#include <fmt/format.h>

#include "gpumem/common/error.h"

namespace gpumem::infer {

bool allows_in_place(std::string_view op) {
  // Elementwise: output[i] depends on input[i] alone (binary ops broadcast
  // the other input; the one reused must have the output's size).
  static constexpr std::array<std::string_view, 40> kOps = {"Abs",         "Acos",      "Add",
                                                            "And",         "Asin",      "Atan",
                                                            "Ceil",        "Clip",      "Cos",
                                                            "Div",         "Elu",       "Erf",
                                                            "Exp",         "Floor",     "Gelu",
                                                            "HardSigmoid", "HardSwish", "LeakyRelu",
                                                            "Log",         "Max",       "Min",
                                                            "Mul",         "Neg",       "Not",
                                                            "Or",          "Pow",       "PRelu",
                                                            "Reciprocal",  "Relu",      "Round",
                                                            "Selu",        "Sigmoid",   "Sign",
                                                            "Sin",         "Softplus",  "Sqrt",
                                                            "Sub",         "Tanh",      "ThresholdedRelu",
                                                            "Xor"};
  // Views: the output is the input's bytes, reinterpreted.
  static constexpr std::array<std::string_view, 6> kViews = {"Reshape",   "Flatten",  "Squeeze",
                                                             "Unsqueeze", "Identity", "Dropout"};
  return std::find(kOps.begin(), kOps.end(), op) != kOps.end() ||
         std::find(kViews.begin(), kViews.end(), op) != kViews.end();
}

ModelBuffers model_buffers(const Graph& graph, const MemoryAnalysis& analysis, bool in_place) {
  if (!analysis.unknown_activations.empty()) {
    const Tensor& t = graph.tensors[static_cast<size_t>(analysis.unknown_activations.front())];
    throw InputError(
        fmt::format("cannot plan: {} activation(s) have an unknown size, e.g. '{}' {}; bind its "
                    "dimensions with " GPUMEM_FLAG_DIM " NAME=VALUE or " GPUMEM_FLAG_BATCH " N",
                    analysis.unknown_activations.size(), printable(t.name), printable(t.shape_string())));
  }
  ModelBuffers out;
  // Activation index by tensor id.
  std::vector<int> act_of(graph.tensors.size(), -1);
  for (size_t a = 0; a < analysis.activations.size(); ++a) {
    act_of[static_cast<size_t>(analysis.activations[a].tensor)] = static_cast<int>(a);
    out.naive_bytes += analysis.activations[a].bytes;
  }
  // Union-find over activations: a merged group is one buffer.
  std::vector<int> parent(analysis.activations.size());
  std::iota(parent.begin(), parent.end(), 0);
  auto root = [&](int x) {
    while (parent[static_cast<size_t>(x)] != x)
      x = parent[static_cast<size_t>(x)] = parent[static_cast<size_t>(parent[static_cast<size_t>(x)])];
    return x;
  };
  std::vector<char> taken(analysis.activations.size(), 0);  // storage already handed to an output
  if (in_place) {
    for (size_t n = 0; n < graph.nodes.size(); ++n) {
      const Node& node = graph.nodes[n];
      if (!(node.domain.empty() || node.domain == "ai.onnx") || !allows_in_place(node.op_type)) continue;
      if (node.outputs.empty() || node.outputs[0] < 0) continue;
      const int out_act = act_of[static_cast<size_t>(node.outputs[0])];
      if (out_act < 0) continue;
      const auto& o = analysis.activations[static_cast<size_t>(out_act)];
      for (int in : node.inputs) {
        if (in < 0) continue;
        const int in_act = act_of[static_cast<size_t>(in)];
        if (in_act < 0 || taken[static_cast<size_t>(in_act)]) continue;
        const Tensor& t = graph.tensors[static_cast<size_t>(in)];
        const auto& i = analysis.activations[static_cast<size_t>(in_act)];
        if (t.graph_output || i.last != static_cast<int>(n) || i.bytes != o.bytes) continue;
        parent[static_cast<size_t>(root(out_act))] = root(in_act);
        taken[static_cast<size_t>(in_act)] = 1;
        out.in_place_tensors += 1;
        out.in_place_bytes += o.bytes;
        break;
      }
    }
  }
  std::vector<int> buffer_of(analysis.activations.size(), -1);
  for (size_t a = 0; a < analysis.activations.size(); ++a) {
    const int r = root(static_cast<int>(a));
    const auto& act = analysis.activations[a];
    int& b = buffer_of[static_cast<size_t>(r)];
    if (b < 0) {
      b = static_cast<int>(out.problem.buffers.size());
      plan::Buffer buf;
      buf.id = graph.tensors[static_cast<size_t>(analysis.activations[static_cast<size_t>(r)].tensor)].name;
      buf.lower = act.first;
      buf.upper = act.last + 1;
      buf.size = static_cast<int64_t>(act.bytes);
      out.problem.buffers.push_back(std::move(buf));
      out.tensors.emplace_back();
    }
    auto& buf = out.problem.buffers[static_cast<size_t>(b)];
    buf.lower = std::min<int64_t>(buf.lower, act.first);
    buf.upper = std::max<int64_t>(buf.upper, act.last + 1);
    out.tensors[static_cast<size_t>(b)].push_back(act.tensor);
  }
  // A control-flow node's subgraph runs while the node does: its largest
  // branch's peak is one more buffer, live at that node only.
  for (const auto& charge : analysis.subgraph_charges) {
    if (charge.bytes == 0) continue;
    plan::Buffer buf;
    buf.id = graph.nodes[static_cast<size_t>(charge.node)].name + " (subgraph)";
    buf.lower = charge.node;
    buf.upper = charge.node + 1;
    buf.size = static_cast<int64_t>(charge.bytes);
    out.problem.buffers.push_back(std::move(buf));
    out.tensors.emplace_back();
  }
  return out;
}

}  // namespace gpumem::infer
