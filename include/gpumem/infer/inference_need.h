#pragma once
// What one inference needs on the device, the figure a capacity is compared
// with: the weights a runtime keeps resident, the activations' arena, and the
// runtime's own memory (CUDA context, library workspaces) when the user gives
// it. gpumem does not guess that overhead: it depends on the driver, the
// libraries loaded and their settings, and is measured on the device.
#include <cstdint>

#include "gpumem/model/inspect.h"

namespace gpumem::infer {

struct InferenceNeed {
  uint64_t weight_bytes = 0;            // resident weights (MemoryAnalysis' weights.resident)
  uint64_t activation_bytes = 0;        // the most activation bytes alive at once, in-place reuse allowed
  uint64_t activation_arena_bytes = 0;  // a planned arena that holds them (heuristic; >= activation_bytes)
  uint64_t overhead_bytes = 0;          // given by the user (--overhead)
  bool sizes_unknown = false;           // some size is unknown: every figure is a lower bound
  // The least memory one inference needs: no plan does with less.
  uint64_t at_least() const { return weight_bytes + activation_bytes + overhead_bytes; }
};

// For the model `inspected` at its bound shapes and pricing. Fast: a greedy
// plan, no exact search (`gpumem plan` runs that).
InferenceNeed inference_need(const Graph& graph, const MemoryAnalysis& analysis, uint64_t overhead_bytes = 0);
inline InferenceNeed inference_need(const InspectResult& inspected, uint64_t overhead_bytes = 0) {
  return inference_need(inspected.model.graph, inspected.memory, overhead_bytes);
}

}  // namespace gpumem::infer
