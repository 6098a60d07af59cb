#include "model/graph_builder.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <unordered_map>

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "model/tensor_value.h"

namespace gpumem::detail {
namespace {

// Names visible from enclosing graphs: a subgraph may read them.
using OuterLookup = std::function<bool(const std::string&)>;

std::string describe_node(const onnx::NodeProto& n, int index) {
  return fmt::format("node #{} '{}' ({})", index,
                     printable(n.name().empty() ? n.op_type() + "_" + std::to_string(index) : n.name()),
                     printable(n.op_type()));
}

bool is_default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

class StructureBuilder {
 public:
  StructureBuilder(const onnx::GraphProto& proto, const std::string& file, const OuterLookup* outer)
      : proto_(proto), file_(file), outer_(outer) {}

  Graph build() {
    graph_.name = proto_.name();
    for (const auto& init : proto_.initializer()) {
      const int id = define(init.name(), TensorRole::Initializer, -1, "initializer");
      graph_.initializers.push_back(id);
      graph_.tensors[static_cast<size_t>(id)].weight = true;
    }
    for (const auto& sparse : proto_.sparse_initializer()) {
      const int id = define(sparse.values().name(), TensorRole::Initializer, -1, "sparse initializer");
      graph_.initializers.push_back(id);
      graph_.tensors[static_cast<size_t>(id)].weight = true;
    }
    for (const auto& in : proto_.input()) {
      if (ids_.count(in.name())) continue;  // IR < 4 lists initializers as inputs too
      graph_.inputs.push_back(define(in.name(), TensorRole::GraphInput, -1, "graph input"));
    }
    // Where each name is produced, to tell "out of order" from "undefined".
    for (int i = 0; i < proto_.node_size(); ++i) {
      for (const auto& out : proto_.node(i).output()) later_.emplace(out, i);
    }
    for (int i = 0; i < proto_.node_size(); ++i) add_node(proto_.node(i), i);
    for (const auto& out : proto_.output()) {
      const int id = lookup(out.name());
      if (id < 0) {
        throw InputError(fmt::format("{}: graph{} output '{}' is produced by no node, input or initializer", file_,
                                     where(), printable(out.name())));
      }
      graph_.outputs.push_back(id);
      graph_.tensors[static_cast<size_t>(id)].graph_output = true;
    }
    return std::move(graph_);
  }

 private:
  std::string where() const { return graph_.name.empty() ? "" : " '" + printable(graph_.name) + "'"; }

  int define(const std::string& name, TensorRole role, int producer, const char* what) {
    if (name.empty()) {
      // Only a node may leave an (optional) output unnamed; callers index
      // tensors by the id of every other definition.
      if (role == TensorRole::NodeOutput) return -1;
      throw InputError(fmt::format("{}: graph{}: an unnamed {}: every initializer and graph input needs a name",
                                   file_, where(), what));
    }
    if (const auto it = ids_.find(name); it != ids_.end()) {
      throw InputError(fmt::format("{}: graph{}: {} '{}' redefines a value already defined (values must have one "
                                   "definition)", file_, where(), what, printable(name)));
    }
    const int id = static_cast<int>(graph_.tensors.size());
    Tensor t;
    t.name = name;
    t.role = role;
    t.producer = producer;
    graph_.tensors.push_back(std::move(t));
    ids_.emplace(name, id);
    return id;
  }

  // Resolves a name read here: a value defined above, or one of an
  // enclosing graph (then recorded as an outer reference). -1 if neither.
  int lookup(const std::string& name) {
    if (const auto it = ids_.find(name); it != ids_.end()) return it->second;
    if (outer_ && (*outer_)(name)) {
      const int id = define(name, TensorRole::OuterScope, -1, "outer value");
      graph_.outer_refs.push_back(id);
      return id;
    }
    return -1;
  }

  int read(const std::string& name, const onnx::NodeProto& n, int index) {
    const int id = lookup(name);
    if (id >= 0) return id;
    if (const auto later = later_.find(name); later != later_.end() && later->second >= index) {
      throw InputError(fmt::format("{}: graph{}: {} reads '{}', which node #{} produces later: the nodes are not in "
                                   "topological order", file_, where(), describe_node(n, index), printable(name), later->second));
    }
    throw InputError(fmt::format("{}: graph{}: {} reads '{}', which no node, graph input or initializer defines", file_,
                                 where(), describe_node(n, index), printable(name)));
  }

  void add_node(const onnx::NodeProto& n, int index) {
    Node node;
    node.name = n.name().empty() ? n.op_type() + "_" + std::to_string(index) : n.name();
    node.op_type = n.op_type();
    node.domain = n.domain();
    for (const auto& in : n.input()) node.inputs.push_back(in.empty() ? -1 : read(in, n, index));

    // Subgraphs see every value defined so far here, and what we see.
    const OuterLookup visible = [this](const std::string& name) {
      return ids_.count(name) > 0 || (outer_ && (*outer_)(name));
    };
    for (const auto& attr : n.attribute()) {
      std::vector<const onnx::GraphProto*> bodies;
      if (attr.has_g()) bodies.push_back(&attr.g());
      for (const auto& g : attr.graphs()) bodies.push_back(&g);
      for (const auto* body : bodies) {
        Graph sub = StructureBuilder(*body, file_, &visible).build();
        for (int ref : sub.outer_refs) {
          const int id = lookup(sub.tensors[static_cast<size_t>(ref)].name);
          const bool seen = std::find(node.implicit_inputs.begin(), node.implicit_inputs.end(), id) !=
                            node.implicit_inputs.end();
          if (id >= 0 && !seen) node.implicit_inputs.push_back(id);
        }
        node.subgraphs.push_back(Subgraph{attr.name(), std::make_unique<Graph>(std::move(sub))});
      }
    }

    for (const auto& out : n.output()) {
      node.outputs.push_back(out.empty() ? -1 : define(out, TensorRole::NodeOutput, index, "node output"));
    }

    // Readers and weights, now that the node's ids are settled.
    bool all_weights = is_default_domain(n.domain()) && n.op_type() == "Constant";
    bool any_input = false;
    bool inputs_weights = true;
    auto note_read = [&](int id) {
      if (id < 0) return;
      auto& t = graph_.tensors[static_cast<size_t>(id)];
      t.last_reader = index;
      any_input = true;
      inputs_weights = inputs_weights && t.weight;
    };
    for (int id : node.inputs) note_read(id);
    for (int id : node.implicit_inputs) note_read(id);
    all_weights = all_weights || (any_input && inputs_weights);
    for (int id : node.outputs) {
      if (id >= 0) graph_.tensors[static_cast<size_t>(id)].weight = all_weights;
    }
    graph_.nodes.push_back(std::move(node));
  }

  const onnx::GraphProto& proto_;
  const std::string& file_;
  const OuterLookup* outer_;
  Graph graph_;
  std::unordered_map<std::string, int> ids_;
  std::unordered_map<std::string, int> later_;
};

// Dims from a TypeProto; nullopt when it has no tensor shape.
std::optional<std::vector<Dim>> dims_of(const onnx::TypeProto& type) {
  if (!type.has_tensor_type() || !type.tensor_type().has_shape()) return std::nullopt;
  std::vector<Dim> dims;
  for (const auto& d : type.tensor_type().shape().dim()) {
    Dim dim;
    if (d.has_dim_value()) dim.value = d.dim_value() >= 0 ? d.dim_value() : -2;  // -2: negative, reported below
    if (d.has_dim_param()) dim.param = d.dim_param();
    dims.push_back(std::move(dim));
  }
  return dims;
}

// No real tensor comes near this (1 EiB); a larger one is a corrupted file
// or a typo in --batch/--dim.
constexpr uint64_t kAbsurdBytes = uint64_t{1} << 60;

// Returns the tensor's bytes (at least one per element) when every dim is
// known, else 0.
uint64_t check_dims(const Tensor& t, const std::string& file, const std::string& graph_name) {
  if (!t.dims) return 0;
  for (size_t axis = 0; axis < t.dims->size(); ++axis) {
    if ((*t.dims)[axis].value == -2) {
        throw InputError(fmt::format("{}: graph{}: tensor '{}' has a negative dimension at axis {}", file,
                                   graph_name.empty() ? "" : " '" + printable(graph_name) + "'", printable(t.name), axis));
    }
  }
  uint64_t elements = 1;
  bool all_known = true;
  for (const auto& d : *t.dims) {
    if (!d.known()) {
      all_known = false;
      continue;
    }
    const auto v = static_cast<uint64_t>(d.value);
    if (v != 0 && elements > kAbsurdBytes / v) {
      elements = kAbsurdBytes;
      break;
    }
    elements *= v;
  }
  const int bits = std::max(dtype_bits(t.dtype), 8);
  if (elements >= kAbsurdBytes / static_cast<uint64_t>(bits / 8)) {
    throw InputError(fmt::format("{}: tensor '{}' {} would hold {} 1 EiB: a dimension is absurd", file, printable(t.name),
                                 printable(t.shape_string()), all_known ? "more than" : "at least"));
  }
  return all_known ? elements * static_cast<uint64_t>(bits / 8) : 0;
}

// Sums the sizes of all tensors, subgraphs included, so that no total the
// memory analysis adds up (and re-prices, up to 8x) can overflow.
void add_to_total(uint64_t& total, uint64_t bytes, const std::string& file) {
  total += bytes;  // both < 2^60: no overflow
  if (total >= kAbsurdBytes) {
    throw InputError(fmt::format("{}: its tensors would hold more than 1 EiB together: a dimension is absurd", file));
  }
}

void apply_type(Tensor& t, const onnx::TypeProto& type) {
  if (!type.has_tensor_type()) return;  // sequences, maps, optionals: size unknown
  if (is_known_dtype(type.tensor_type().elem_type())) t.dtype = static_cast<DType>(type.tensor_type().elem_type());
  t.dims = dims_of(type);
}

void apply_subgraph_types(Graph& graph, const onnx::GraphProto& proto, const TypeMap* main_types,
                          const std::string& file, uint64_t& total_bytes) {
  TypeMap local;
  const TypeMap* types = main_types;
  if (!types) {
    for (const auto& vi : proto.input()) local[vi.name()] = vi.type();
    for (const auto& vi : proto.value_info()) local[vi.name()] = vi.type();
    for (const auto& vi : proto.output()) local.emplace(vi.name(), vi.type());
    types = &local;
  }
  std::unordered_map<std::string, const onnx::TensorProto*> inits;
  for (const auto& init : proto.initializer()) inits[init.name()] = &init;

  for (auto& t : graph.tensors) {
    if (t.role == TensorRole::Initializer) {
      if (const auto it = inits.find(t.name); it != inits.end()) {
        const auto& init = *it->second;
        if (is_known_dtype(init.data_type())) t.dtype = static_cast<DType>(init.data_type());
        std::vector<Dim> dims;
        for (int64_t d : init.dims()) dims.push_back(Dim{d >= 0 ? d : -2, {}});
        t.dims = std::move(dims);
        if (const auto problem = check_tensor_data(init)) {
          throw InputError(fmt::format("{}: initializer '{}' {}", file, printable(t.name), *problem));
        }
        add_to_total(total_bytes, check_dims(t, file, graph.name), file);
        continue;
      }
    }
    if (const auto it = types->find(t.name); it != types->end()) apply_type(t, it->second);
    add_to_total(total_bytes, check_dims(t, file, graph.name), file);
  }

  int index = 0;
  for (auto& node : graph.nodes) {
    const auto& pnode = proto.node(index++);
    size_t k = 0;
    for (const auto& attr : pnode.attribute()) {
      std::vector<const onnx::GraphProto*> bodies;
      if (attr.has_g()) bodies.push_back(&attr.g());
      for (const auto& g : attr.graphs()) bodies.push_back(&g);
      for (const auto* body : bodies) {
        if (k < node.subgraphs.size()) {
          apply_subgraph_types(*node.subgraphs[k++].graph, *body, nullptr, file, total_bytes);
        }
      }
    }
  }
}

}  // namespace

Graph build_graph_structure(const onnx::GraphProto& proto, const std::string& file) {
  return StructureBuilder(proto, file, nullptr).build();
}

void apply_types(Graph& graph, const onnx::GraphProto& proto, const TypeMap& main_types, const std::string& file) {
  uint64_t total_bytes = 0;
  apply_subgraph_types(graph, proto, &main_types, file, total_bytes);
}

}  // namespace gpumem::detail
