#pragma once
// Turns an ONNX GraphProto into gpumem's Graph: first its structure (names,
// roles, producers, readers, weights), checked for topological order; then,
// after shape inference, the types and shapes of its tensors.
#include <string>

#include <onnx/onnx_pb.h>

#include "gpumem/model/graph.h"
#include "model/shape_inference.h"

namespace gpumem::detail {

// Throws InputError("<file>: ...") when a node reads a value nothing defines
// before it, or a value is defined twice.
Graph build_graph_structure(const onnx::GraphProto& proto, const std::string& file);

// Fills dtype and dims of every tensor: main-graph values from `main_types`,
// subgraph values from the value_info that inference wrote into `proto`.
// Throws InputError on a negative dimension or an impossible size.
void apply_types(Graph& graph, const onnx::GraphProto& proto, const TypeMap& main_types, const std::string& file);

}  // namespace gpumem::detail
