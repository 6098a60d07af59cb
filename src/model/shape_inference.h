#pragma once
// Infers the type and shape of every value of a model's main graph.
//
// ONNX's own per-operator inference functions do the work, driven node by
// node in file order by this engine, which also evaluates shape arithmetic
// (constant_folding.h) as it goes: a Reshape whose target shape is computed
// by Shape -> Gather -> Unsqueeze -> Concat gets a static output because the
// Concat's value is known by the time the Reshape is reached. ONNX 1.12's
// InferShapes alone leaves such outputs unshaped in PyTorch exports.
// Subgraphs (If/Loop/Scan) are inferred by ONNX's graph inferencer, which
// records their value types in the subgraphs' value_info.
#include <string>
#include <unordered_map>

#include <onnx/onnx_pb.h>

#include "gpumem/model/onnx_loader.h"

namespace gpumem::detail {

using TypeMap = std::unordered_map<std::string, onnx::TypeProto>;

struct ShapeInferenceOutput {
  TypeMap types;  // every value of the main graph whose type is known
  ShapeInferenceNotes notes;
};

// `model` is modified only where ONNX's graph inferencer writes subgraph
// value_info.
ShapeInferenceOutput infer_shapes(onnx::ModelProto& model);

}  // namespace gpumem::detail
