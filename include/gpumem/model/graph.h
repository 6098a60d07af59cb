#pragma once
// The model as gpumem analyses it: tensors with types and shapes, nodes in
// execution order, and the subgraphs of control-flow nodes. It is built from
// an ONNX file by load_onnx_model() and carries no protobuf types, so analyses
// and tests can also build one by hand.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpumem/model/dtype.h"

namespace gpumem {

// One dimension: a number, or a symbol (dim_param) not bound to one, or
// nothing known at all.
struct Dim {
  int64_t value = -1;  // >= 0 when known
  std::string param;   // the symbolic name when the file gave one
  bool known() const { return value >= 0; }
};

enum class TensorRole {
  GraphInput,   // fed by the caller
  Initializer,  // stored in the file (its data may be absent: graph-only files)
  NodeOutput,   // produced by a node (Constant nodes included)
  OuterScope,   // a subgraph's reference to a value of an enclosing graph
};

struct Tensor {
  std::string name;
  TensorRole role = TensorRole::NodeOutput;
  DType dtype = DType::Undefined;
  // nullopt when not even the rank is known.
  std::optional<std::vector<Dim>> dims;
  int producer = -1;     // node index for NodeOutput, else -1
  int last_reader = -1;  // largest index of a node that reads it, -1 if none
  bool graph_output = false;
  // Initializers, Constant outputs and outputs of nodes whose inputs are all
  // weights: what a runtime stores or folds once, not per inference.
  bool weight = false;

  // Product of the dims when all are known; nullopt otherwise.
  std::optional<uint64_t> elements() const;
  std::string shape_string() const;  // "[1,3,224,224]", "[N,128]", "?"
};

struct Graph;

struct Subgraph {
  std::string attribute;  // "then_branch", "else_branch", "body"
  std::unique_ptr<Graph> graph;
};

struct Node {
  std::string name;  // never empty: "<op_type>_<index>" when the file has none
  std::string op_type;
  std::string domain;
  std::vector<int> inputs;  // tensor ids; -1 for an omitted optional input
  std::vector<int> outputs;
  // Values of enclosing graphs read inside this node's subgraphs: they must
  // stay alive until this node runs, as if they were inputs.
  std::vector<int> implicit_inputs;
  std::vector<Subgraph> subgraphs;
  // Computes nothing at run time: a Dropout whose ratio is 0, which
  // PyTorch returns its input for (ATen's dropout: p == 0 returns input).
  bool passthrough = false;
};

struct Graph {
  std::string name;
  std::vector<Tensor> tensors;
  std::vector<Node> nodes;  // in execution (file) order, checked topological
  std::vector<int> inputs;  // GraphInput tensors, in declaration order
  std::vector<int> outputs;
  std::vector<int> initializers;
  // OuterScope tensors of a subgraph (empty for the main graph).
  std::vector<int> outer_refs;

  int find(const std::string& tensor_name) const;  // -1 when absent
};

}  // namespace gpumem
