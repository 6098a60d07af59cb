#include "gpumem/infer/inference_levers.h"
#include "gpumem/common/flag_names.h"

#include <algorithm>

#include <fmt/format.h>

#include "gpumem/common/error.h"

namespace gpumem::infer {
namespace {

bool has_wide_floats(const Graph& g, DType than) {
  return std::any_of(g.tensors.begin(), g.tensors.end(),
                     [&](const Tensor& t) { return is_floating(t.dtype) && dtype_bits(t.dtype) > dtype_bits(than); });
}

int64_t saved(const InferenceNeed& now, const InferenceNeed& then) {
  return static_cast<int64_t>(now.at_least()) - static_cast<int64_t>(then.at_least());
}

}  // namespace

std::vector<InferenceLever> inference_levers(const InspectResult& base, const InspectOptions& current,
                                             const InferenceNeed& now) {
  std::vector<InferenceLever> levers;
  const Graph& g = base.model.graph;
  auto priced = [&](PricingOptions pricing) {
    return inference_need(g, analyze_memory(g, pricing), now.overhead_bytes);
  };
  auto keep = [&](std::string setting, std::string effect, InferenceNeed need) {
    if (need.at_least() != now.at_least()) levers.push_back({std::move(setting), std::move(effect), need});
  };

  const bool priced_already = current.pricing.weights_as || current.pricing.activations_as;
  if (!priced_already && has_wide_floats(g, DType::Float16)) {
    keep(GPUMEM_FLAG_DTYPE " fp16", "weights and activations in half precision (bf16 is the same size)",
         priced({DType::Float16, DType::Float16}));
    keep(GPUMEM_FLAG_WEIGHTS_DTYPE " int8", "weights quantised to int8, activations as they are",
         priced({DType::Int8, std::nullopt}));
  }
  const BatchAxis& axis = base.model.batch_axis;
  const std::optional<int64_t> loaded = axis.value > 0 ? std::optional<int64_t>(axis.value) : std::nullopt;
  if (const auto batch = current.load.batch ? current.load.batch : loaded; batch && *batch > 0) {
    // A batch the user bound by its symbol (--dim batch=8) is changed the
    // same way, so the advice is the flag to edit.
    const std::string& symbol = axis.symbol;
    const bool by_symbol = !current.load.batch && !symbol.empty() && current.load.dims.count(symbol) > 0;
    for (const int64_t other : {*batch * 2, *batch / 2}) {
      if (other < 1 || other == *batch) continue;
      InspectOptions options = current;
      if (by_symbol) {
        options.load.dims[symbol] = other;
      } else {
        options.load.batch = other;
      }
      try {
        keep(by_symbol ? fmt::format(GPUMEM_FLAG_DIM " {}={}", symbol, other)
                       : fmt::format(GPUMEM_FLAG_BATCH " {}", other),
             by_symbol      ? fmt::format("{} {} instead of {}", symbol, other, *batch)
             : axis.assumed ? fmt::format("the first input dimension {} instead of {}", other, *batch)
                            : fmt::format("the batch {} instead of {}", other, *batch),
             inference_need(inspect_model(base.model.path, options), now.overhead_bytes));
      } catch (const InputError&) {
        // A model whose shapes do not follow the first dimension: no lever.
      }
    }
  }
  std::stable_sort(levers.begin(), levers.end(),
                   [&](const auto& a, const auto& b) { return saved(now, a.need) > saved(now, b.need); });
  return levers;
}

}  // namespace gpumem::infer
