#pragma once
// Which axis of a graph's data inputs is the batch. Exports are often
// sequence-first (a [seq, batch] token input), so "the first dimension" is
// only the last resort: a name says it (--batch-dim, or a dynamic axis
// named like a batch), else the one symbol all data inputs share that is
// not named like a sequence, else axis 0, marked as assumed.
#include <string>
#include <utility>
#include <vector>

#include <onnx/onnx_pb.h>

#include "gpumem/model/onnx_loader.h"

namespace gpumem::detail {

// Throws InputError naming the file when --batch-dim names no dimension
// (listing the candidates) or an axis some data input lacks.
BatchAxis find_batch_axis(const onnx::GraphProto& graph, const std::string& batch_dim, const std::string& file);

// Binds the axis to `batch` in the graph's declared types: by symbol in
// inputs, outputs and value_info; by index in every data input.
void bind_batch(onnx::GraphProto& graph, const BatchAxis& axis, int64_t batch);

// Where the axis is: (data input, index) pairs, taken before binding.
using AxisPositions = std::vector<std::pair<std::string, int>>;
AxisPositions batch_positions(const onnx::GraphProto& graph, const BatchAxis& axis);

// The axis's size at those positions in the declared inputs (after
// binding); 0 when unknown.
int64_t batch_value(const onnx::GraphProto& graph, const AxisPositions& positions);

}  // namespace gpumem::detail
