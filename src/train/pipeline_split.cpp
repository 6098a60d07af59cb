// Pipeline stages: a chain of layers split into contiguous stages, one per
// GPU, minimising the largest stage's memory. Under 1F1B the first stage
// runs N forward micro-batches before its first backward, so stage i of N
// keeps N - i micro-batches of its layers' activations; a stage's cost thus
// depends on its position as well as its layers, and the split that evens
// parameters alone is not the best one.
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "gpumem/common/error.h"
#include "gpumem/train/sharding.h"

namespace gpumem::train {
namespace {

struct Prefix {
  std::vector<uint64_t> parameters{0}, activations{0};
  explicit Prefix(const std::vector<LayerStates>& layers) {
    for (const LayerStates& l : layers) {
      parameters.push_back(parameters.back() + l.parameters);
      activations.push_back(activations.back() + l.activation_bytes);
    }
  }
};

uint64_t stage_bytes(const Prefix& sum, int first, int last, int stage, int stages, uint64_t per_parameter) {
  const auto f = static_cast<size_t>(first), l = static_cast<size_t>(last);
  return (sum.parameters[l] - sum.parameters[f]) * per_parameter +
         static_cast<uint64_t>(stages - stage) * (sum.activations[l] - sum.activations[f]);
}

}  // namespace

uint64_t pipeline_stage_bytes(const std::vector<LayerStates>& layers, int first, int last, int stage, int stages,
                              uint64_t state_bytes_per_parameter) {
  return stage_bytes(Prefix(layers), first, last, stage, stages, state_bytes_per_parameter);
}

PipelineSplit split_pipeline(const std::vector<LayerStates>& layers, int stages, uint64_t per_parameter) {
  const int n = static_cast<int>(layers.size());
  if (stages < 1 || n < stages) {
    throw InputError("pipeline: " + std::to_string(n) + " layers cannot make " + std::to_string(stages) + " stages");
  }
  const Prefix sum(layers);
  // best[k][i]: the least largest stage when stages 0..k-1 hold layers
  // [0, i), each stage at least one layer; cut[k][i] the start of stage k-1.
  // O(stages * n^2): a thousand layers on eight GPUs is 8M steps.
  constexpr uint64_t kNone = std::numeric_limits<uint64_t>::max();
  const auto rows = static_cast<size_t>(stages) + 1, cols = static_cast<size_t>(n) + 1;
  std::vector<std::vector<uint64_t>> best(rows, std::vector<uint64_t>(cols, kNone));
  std::vector<std::vector<int>> cut(rows, std::vector<int>(cols, 0));
  best[0][0] = 0;
  for (int k = 1; k <= stages; ++k) {
    // Leave at least one layer for each later stage.
    for (int i = k; i <= n - (stages - k); ++i) {
      for (int j = k - 1; j < i; ++j) {
        const uint64_t before = best[k - 1][static_cast<size_t>(j)];
        if (before == kNone) continue;
        const uint64_t worst = std::max(before, stage_bytes(sum, j, i, k - 1, stages, per_parameter));
        if (worst < best[k][static_cast<size_t>(i)]) {
          best[k][static_cast<size_t>(i)] = worst;
          cut[k][static_cast<size_t>(i)] = j;
        }
      }
    }
  }
  PipelineSplit split;
  split.largest_stage_bytes = best[rows - 1][cols - 1];
  split.first_layer.assign(static_cast<size_t>(stages), 0);
  split.stage_bytes.assign(static_cast<size_t>(stages), 0);
  int end = n;
  for (int k = stages; k >= 1; --k) {
    const int start = cut[static_cast<size_t>(k)][static_cast<size_t>(end)];
    split.first_layer[static_cast<size_t>(k - 1)] = start;
    split.stage_bytes[static_cast<size_t>(k - 1)] = stage_bytes(sum, start, end, k - 1, stages, per_parameter);
    end = start;
  }
  return split;
}

ShardingPlan pipeline_plan(const ModelStates& m, const Cluster& c) {
  const int stages = c.total_gpus();
  const uint64_t per_parameter = m.weight_bytes_per_parameter + m.grad_bytes_per_parameter +
                                 2 * m.master_bytes_per_parameter + m.optimizer_state_bytes_per_parameter;
  const PipelineSplit split = split_pipeline(m.layers, stages, per_parameter);
  ShardingPlan p;
  p.engine = "pipeline";
  p.setting = std::to_string(stages) + " stages, 1F1B";
  p.stage_first_layer = split.first_layer;
  // The parts are those of the largest stage.
  const auto largest = static_cast<size_t>(std::max_element(split.stage_bytes.begin(), split.stage_bytes.end()) -
                                           split.stage_bytes.begin());
  const int first = split.first_layer[largest];
  const int last =
      largest + 1 < split.first_layer.size() ? split.first_layer[largest + 1] : static_cast<int>(m.layers.size());
  uint64_t parameters = 0, activations = 0;
  for (int i = first; i < last; ++i) {
    parameters += m.layers[static_cast<size_t>(i)].parameters;
    activations += m.layers[static_cast<size_t>(i)].activation_bytes;
  }
  p.weight_bytes = m.weight_bytes_per_parameter * parameters;
  p.gradient_bytes = (m.grad_bytes_per_parameter + m.master_bytes_per_parameter) * parameters;
  p.optimizer_bytes = (m.master_bytes_per_parameter + m.optimizer_state_bytes_per_parameter) * parameters;
  p.activation_bytes = static_cast<uint64_t>(stages - static_cast<int>(largest)) * activations;
  p.gpu_bytes_per_gpu = split.largest_stage_bytes;
  return p;
}

}  // namespace gpumem::train
