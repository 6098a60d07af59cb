#pragma once
// Evaluates the shape arithmetic that exporters write (Shape, Gather,
// Unsqueeze, Concat, Slice, arithmetic, Cast, Range, ConstantOfShape, Where,
// Expand, Reshape...) when its inputs are known at load time, so that the
// shapes downstream become static. Only small tensors are evaluated.
#include <cstdint>
#include <optional>
#include <vector>

#include <onnx/onnx_pb.h>

#include "model/tensor_value.h"

namespace gpumem::detail {

struct FoldInputs {
  // Known values of the node's inputs (nullptr when unknown or omitted).
  std::vector<const TensorValue*> values;
  // Static shapes of the inputs, when every dimension is known: Shape and
  // Size need only these.
  std::vector<std::optional<std::vector<int64_t>>> shapes;
};

// One value per output of `node`, or nullopt when the node cannot be
// evaluated (unknown op, unknown input, result too large, invalid values).
std::optional<std::vector<TensorValue>> fold_node(const onnx::NodeProto& node, int64_t opset,
                                                  const FoldInputs& inputs);

}  // namespace gpumem::detail
