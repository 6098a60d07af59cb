#pragma once
// Planning a model's activations: the buffers of `gpumem inspect`'s
// lifetimes (same semantics), with in-place reuse where it is legal.
//
// In-place: a node's output may take the storage of one of its inputs when
// the input dies at that node (no later reader, not a graph output), has the
// same byte size, and the op writes each output element from the same
// position of that input only (elementwise ops), or is a view that only
// reinterprets the bytes (Reshape, Flatten, Squeeze, Unsqueeze, Identity,
// Dropout at inference). The two tensors then share one buffer whose
// lifetime spans both.
#include <string>
#include <string_view>
#include <vector>

#include "gpumem/model/graph.h"
#include "gpumem/model/memory_analysis.h"
#include "gpumem/plan/problem.h"

namespace gpumem::infer {

// Whether `op_type` (default ONNX domain) may write its output over an input.
bool allows_in_place(std::string_view op_type);

struct ModelBuffers {
  // One buffer per storage, time = node index; then one per control-flow node
  // with subgraphs, live at that node, as large as its largest subgraph's peak.
  plan::Problem problem;
  std::vector<std::vector<int>> tensors;  // per buffer: the activation tensor ids it holds (none: a subgraph's)
  uint64_t naive_bytes = 0;               // every activation its own memory, no reuse
  int in_place_tensors = 0;               // tensors that took an input's storage
  uint64_t in_place_bytes = 0;            // their bytes
};

// Buffers of the activations of `analysis` (all sizes must be known: throws
// InputError naming the first unknown one otherwise). `in_place` enables the
// reuse above.
ModelBuffers model_buffers(const Graph& graph, const MemoryAnalysis& analysis, bool in_place);

}  // namespace gpumem::infer
