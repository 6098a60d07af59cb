#pragma once
// The forward graph as PyTorch runs it: values with sizes and whether they
// need a gradient, and ops at PyTorch's granularity. The ONNX exporter
// decomposes some ops PyTorch runs as one kernel (GELU into Div, Erf, Add,
// Mul, Mul; LayerNorm into ten reductions and elementwise ops; Linear into
// MatMul and Add): counting the pieces would count tensors PyTorch never
// allocates, so those patterns are fused back here.
#include <cstdint>
#include <string>
#include <vector>

#include "gpumem/model/graph.h"
#include "gpumem/model/memory_analysis.h"
#include "gpumem/train/training_step.h"

namespace gpumem::train {

struct Value {
  std::string name;
  uint64_t bytes = 0;
  DType dtype = DType::Float;
  std::vector<int64_t> dims;  // known dims (parameters' shapes matter to Adafactor)
  bool parameter = false;     // a model parameter (an initializer PyTorch trains)
  bool trainable = false;     // a parameter not frozen
  bool buffer = false;        // running statistics: resident, never trained
  bool input = false;         // the batch or the labels
  bool requires_grad = false;
  int alias_of = -1;       // a view of another value (or of a parameter): no storage of its own
  bool contiguous = true;  // false for a transposed view: reshaping it copies
  // Referenced until the loss is computed (transformers' logits, returned
  // beside the loss by a forward that also computes it).
  bool held_through_loss = false;
};

struct Op {
  std::string kind;             // PyTorch's op: "convolution", "linear", "gelu", "layer_norm"...; else the ONNX op type
  std::string name;             // the ONNX node (the first of a fused pattern)
  std::vector<int> inputs;      // value ids; -1 for an omitted optional input
  std::vector<int> outputs;     // value ids
  bool needs_backward = false;  // some input requires a gradient
};

struct StepGraph {
  std::vector<Value> values;
  std::vector<Op> ops;  // forward, in execution order; the loss is appended by the caller
  std::vector<int> graph_outputs;
  std::vector<int> parameters;    // value ids, in file order
  bool batch_statistics = false;  // some BatchNormalization runs in training mode
  bool has_batch_norm = false;
};

// Builds it from a loaded graph and its analysis (sizes priced as the
// precision policy wants). Parameters whose name matches `frozen` (when not
// empty) need no gradient. Throws InputError when a size is unknown.
StepGraph build_step_graph(const Graph& graph, const MemoryAnalysis& analysis, const std::string& frozen,
                           const std::string& file);

// One step over a graph built elsewhere (a decoder from its architecture,
// decoder_step.h): the loss, forward, backward and optimizer as for an
// export. `model` names it in errors and the report.
TrainingStep simulate_step_graph(StepGraph graph, const TrainOptions& options, const std::string& model);

// Whether the op's output is a view of its first input in PyTorch (reshape,
// transpose, squeeze, slice...): no allocation.
bool is_view_op(const std::string& kind);

}  // namespace gpumem::train
