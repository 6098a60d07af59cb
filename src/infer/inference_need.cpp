#include "gpumem/infer/inference_need.h"

#include <algorithm>

#include "gpumem/infer/model_plan.h"
#include "gpumem/plan/solver.h"

namespace gpumem::infer {

InferenceNeed inference_need(const Graph& graph, const MemoryAnalysis& m, uint64_t overhead_bytes) {
  InferenceNeed need;
  need.weight_bytes = m.weights.resident.bytes;
  need.overhead_bytes = overhead_bytes;
  need.sizes_unknown = m.lower_bound();
  if (need.sizes_unknown) {
    // No plan without every size. The largest known activation still has to
    // fit; the known peak would not bound from below once in-place reuse
    // merges tensors.
    for (const auto& a : m.activations) need.activation_bytes = std::max(need.activation_bytes, a.bytes);
    need.activation_arena_bytes = need.activation_bytes;
    return need;
  }
  const ModelBuffers buffers = model_buffers(graph, m, /*in_place=*/true);
  plan::SolveOptions options;
  options.solver = plan::SolverKind::Heuristic;
  const plan::SolveResult planned = plan::solve(buffers.problem, options);
  need.activation_bytes = static_cast<uint64_t>(planned.lower_bound);
  need.activation_arena_bytes = static_cast<uint64_t>(planned.plan.arena);
  return need;
}

}  // namespace gpumem::infer
