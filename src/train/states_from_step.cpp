#include <algorithm>
#include <map>

#include "gpumem/train/checkpoint_plan.h"
#include "gpumem/train/fit.h"
#include "gpumem/train/sharding.h"

namespace gpumem::train {
namespace {

// A parameter's module: its name less the last component
// ("layer1.0.conv1.weight" -> "layer1.0.conv1").
std::string owner(const std::string& parameter) {
  const auto dot = parameter.rfind('.');
  return dot == std::string::npos ? std::string() : parameter.substr(0, dot);
}

}  // namespace

ModelStates model_states_of(const TrainingStep& step) {
  const uint64_t width = step.options.precision == Precision::kBf16 ? 2 : 4;
  std::map<std::string, uint64_t> per_module;
  for (const auto& a : step.allocations) {
    if (a.category == Category::kWeights && a.op == "parameter") per_module[owner(a.tensor)] += a.bytes / width;
  }
  uint64_t largest = 0;
  for (const auto& [module, parameters] : per_module) largest = std::max(largest, parameters);
  ModelStates states = model_states(step, largest);
  // The chain of layers for pipeline stages: the finest depth of the
  // module tree that still splits the model into contiguous units.
  std::vector<ChainUnit> units;
  for (int depth = 2; depth >= 1 && units.size() < 2; --depth) units = chain_units(step, depth);
  // Every op belongs to a stage: those between two layers (and a stem
  // before the first, a head after the last) go with the next layer, or the
  // last.
  for (size_t i = 0; i < units.size(); ++i) {
    units[i].first_op = i == 0 ? 0 : units[i - 1].last_op + 1;
    if (i + 1 == units.size()) units[i].last_op = static_cast<int>(step.op_names.size()) - 1;
  }
  for (const auto& u : units) {
    LayerStates layer;
    for (const auto& a : step.allocations) {
      const bool read_here =
          std::any_of(a.read_by.begin(), a.read_by.end(), [&](int k) { return k >= u.first_op && k <= u.last_op; });
      if (a.category == Category::kWeights && a.op == "parameter" && read_here) layer.parameters += a.bytes / width;
      if (a.op_index >= u.first_op && a.op_index <= u.last_op && !a.kept_by.empty()) layer.activation_bytes += a.bytes;
    }
    states.layers.push_back(layer);
  }
  return states;
}

}  // namespace gpumem::train
