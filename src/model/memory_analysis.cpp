#include "gpumem/model/memory_analysis.h"

#include <algorithm>

namespace gpumem {
namespace {

void add(DTypeTotals& totals, uint64_t elements, uint64_t bytes) {
  totals.tensors += 1;
  totals.elements += elements;
  totals.bytes += bytes;
}

// Per tensor: whether a runtime keeps it after folding constants, i.e. a node
// that computes at run time reads it, or the graph returns it.
std::vector<bool> read_at_run_time(const Graph& graph) {
  std::vector<bool> read(graph.tensors.size(), false);
  for (const auto& node : graph.nodes) {
    const bool folded = !node.outputs.empty() && std::all_of(node.outputs.begin(), node.outputs.end(), [&](int id) {
      return id < 0 || graph.tensors[static_cast<size_t>(id)].weight;
    });
    if (folded) continue;
    for (const auto* ids : {&node.inputs, &node.implicit_inputs}) {
      for (int id : *ids) {
        if (id >= 0) read[static_cast<size_t>(id)] = true;
      }
    }
  }
  for (int id : graph.outputs) read[static_cast<size_t>(id)] = true;
  // A folded Identity is an alias, not a copy: what it holds stays resident
  // once, as its source. Reverse order resolves chains of them.
  for (auto node = graph.nodes.rbegin(); node != graph.nodes.rend(); ++node) {
    if (node->op_type != "Identity" || node->inputs.size() != 1 || node->outputs.size() != 1) continue;
    const int in = node->inputs[0], out = node->outputs[0];
    if (in < 0 || out < 0 || !graph.tensors[static_cast<size_t>(out)].weight || !read[static_cast<size_t>(out)])
      continue;
    read[static_cast<size_t>(out)] = false;
    read[static_cast<size_t>(in)] = true;
  }
  return read;
}

void add_weights(const Graph& graph, const PricingOptions& pricing, WeightsSummary& w) {
  const std::vector<bool> resident = read_at_run_time(graph);
  for (size_t id = 0; id < graph.tensors.size(); ++id) {
    const Tensor& t = graph.tensors[id];
    if (!t.weight || t.role == TensorRole::OuterScope) continue;
    const auto bytes = priced_bytes(t, pricing.weights_as);
    if (!bytes) {
      w.unknown.push_back(t.name);
      continue;
    }
    const uint64_t elements = *t.elements();
    const DType dtype = priced_dtype(t, pricing.weights_as);
    w.count += 1;
    w.elements += elements;
    w.bytes += *bytes;
    add(w.by_dtype[dtype], elements, *bytes);
    if (resident[id]) add(w.resident, elements, *bytes);
    if (t.producer >= 0) {
      const Node& producer = graph.nodes[static_cast<size_t>(t.producer)];
      if (producer.op_type != "Constant") {
        add(w.derived, elements, *bytes);
        add(w.derived_by_op[producer.op_type], elements, *bytes);
      }
    }
  }
  for (const auto& node : graph.nodes) {
    for (const auto& sub : node.subgraphs) add_weights(*sub.graph, pricing, w);
  }
}

}  // namespace

DType priced_dtype(const Tensor& t, std::optional<DType> reprice_as) {
  return reprice_as && is_floating(t.dtype) ? *reprice_as : t.dtype;
}

std::optional<uint64_t> priced_bytes(const Tensor& t, std::optional<DType> reprice_as) {
  const auto elements = t.elements();
  if (!elements) return std::nullopt;
  return storage_bytes(priced_dtype(t, reprice_as), *elements);
}

bool MemoryAnalysis::lower_bound() const {
  if (!unknown_activations.empty() || !weights.unknown.empty()) return true;
  return std::any_of(subgraph_charges.begin(), subgraph_charges.end(), [](const auto& c) { return c.has_unknown; });
}

MemoryAnalysis analyze_memory(const Graph& graph, const PricingOptions& pricing) {
  MemoryAnalysis m;
  m.pricing = pricing;
  add_weights(graph, pricing, m.weights);

  const int n = static_cast<int>(graph.nodes.size());
  const int last_node = std::max(n - 1, 0);
  // Difference array over node indices: +bytes where a tensor becomes live,
  // -bytes just after its last use.
  std::vector<int64_t> delta(static_cast<size_t>(n) + 1, 0);
  for (size_t id = 0; id < graph.tensors.size(); ++id) {
    const Tensor& t = graph.tensors[id];
    if (t.weight || (t.role != TensorRole::GraphInput && t.role != TensorRole::NodeOutput)) continue;
    const auto bytes = priced_bytes(t, pricing.activations_as);
    if (!bytes) {
      m.unknown_activations.push_back(static_cast<int>(id));
      continue;
    }
    Activation a;
    a.tensor = static_cast<int>(id);
    a.bytes = *bytes;
    a.first = t.role == TensorRole::GraphInput ? 0 : t.producer;
    a.last = t.graph_output ? last_node : std::max(t.last_reader, a.first);
    m.total_activation_bytes += a.bytes;
    if (n > 0) {
      delta[static_cast<size_t>(a.first)] += static_cast<int64_t>(a.bytes);
      delta[static_cast<size_t>(a.last) + 1] -= static_cast<int64_t>(a.bytes);
    }
    m.activations.push_back(a);
  }

  // A control-flow node also holds, while it runs, its largest subgraph.
  std::vector<uint64_t> charge(static_cast<size_t>(n), 0);
  for (int i = 0; i < n; ++i) {
    const Node& node = graph.nodes[static_cast<size_t>(i)];
    if (node.subgraphs.empty()) continue;
    SubgraphCharge c;
    c.node = i;
    for (const auto& sub : node.subgraphs) {
      const MemoryAnalysis inner = analyze_memory(*sub.graph, pricing);
      c.bytes = std::max(c.bytes, inner.peak_live_bytes);
      c.has_unknown = c.has_unknown || inner.lower_bound();
      ++c.subgraphs;
    }
    charge[static_cast<size_t>(i)] = c.bytes;
    m.subgraph_charges.push_back(c);
  }

  int64_t live = 0;
  m.timeline.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    live += delta[static_cast<size_t>(i)];
    const uint64_t here = static_cast<uint64_t>(live) + charge[static_cast<size_t>(i)];
    m.timeline.push_back(TimelinePoint{i, here});
    if (m.peak_node < 0 || here > m.peak_live_bytes) {
      m.peak_live_bytes = here;
      m.peak_node = i;
    }
  }
  return m;
}

}  // namespace gpumem
