#include "llm/sliding_windows.h"

#include <fmt/format.h>

#include "gpumem/common/units.h"
#include "gpumem/llm/model_families.h"

namespace gpumem::llm {
namespace {

// llama.cpp's window pattern for an architecture (model_families.cpp):
// nullptr when llama.cpp has no rule for it.
const ModelFamily* family_of(const std::string& architecture) {
  const ModelFamily* f = model_family(architecture);
  return f != nullptr && f->window_period >= 0 ? f : nullptr;
}

}  // namespace

void apply_window_rules(LlmModel& m, const std::vector<bool>* listed_layers, std::optional<uint64_t> listed_period) {
  m.window_rule.clear();
  if (m.sliding_window == 0) {
    m.swa_layers.clear();
    return;
  }
  const ModelFamily* family = family_of(m.architecture);
  if (family != nullptr && family->window_period == 0) {
    m.window_rule = fmt::format(
        "the file's sliding window of {} tokens is not used: llama.cpp runs {} with full "
        "attention on every layer",
        format_count(m.sliding_window), m.architecture);
    m.sliding_window = 0;
    m.swa_layers.clear();
    return;
  }
  if (listed_layers != nullptr) {
    m.swa_layers = *listed_layers;
    m.window_rule = "the layers the file lists (layer_types)";
    return;
  }
  const uint64_t period = listed_period.value_or(family != nullptr ? static_cast<uint64_t>(family->window_period) : 0);
  if (period >= 2) {
    m.swa_layers.assign(m.n_layer, false);
    for (uint32_t i = 0; i < m.n_layer; ++i) m.swa_layers[i] = i % period < period - 1;
    m.window_rule = fmt::format(
        "{} of every {} layers, the last of each {} attending to the whole context ({}'s "
        "pattern in llama.cpp)",
        period - 1, period, period, m.architecture);
    return;
  }
  // An architecture the table does not know, naming a window without a
  // pattern: every layer windowed, as Hugging Face's own code does.
  m.swa_layers.assign(m.n_layer, true);
  m.window_rule = fmt::format(
      "every layer: {} is not in gpumem's table of llama.cpp's window rules, so the "
      "config's window is taken for all layers",
      m.architecture);
}

}  // namespace gpumem::llm
