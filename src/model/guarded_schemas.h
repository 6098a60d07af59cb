#pragma once
// ONNX's schema registry, with every inference function wrapped in checks of
// what it assumes about its node (see guarded_schemas.cpp). Serves the shape
// inference engine and, through GraphInferenceContext, ONNX's own inference
// of every subgraph.
#include <onnx/defs/schema.h>

namespace gpumem::detail {

const onnx::ISchemaRegistry* guarded_schemas();

}  // namespace gpumem::detail
