#include "llm/sliding_windows.h"

#include <algorithm>
#include <array>
#include <string_view>

#include <fmt/format.h>

#include "gpumem/common/units.h"

namespace gpumem::llm {
namespace {

// llama.cpp's llama-model.cpp, load_hparams(): the architectures that call
// hparams.set_swa_pattern(period), where layer i is windowed when
// i % period < period - 1 (the last layer of each period attends to the
// whole context), and those it runs with full attention (period 0) although
// their Hugging Face configs name a window. Names as config.json's
// model_type and GGUF's general.architecture spell them.
struct WindowFamily {
  std::string_view architecture;
  uint32_t period;
};

constexpr std::array<WindowFamily, 14> kFamilies{{
    {"gemma2", 2},       // alternating, a windowed layer first
    {"gemma3", 6},       // five windowed layers to one global (sliding_window_pattern)
    {"gemma3_text", 6},  //
    {"cohere2", 4},      // three windowed to one global
    {"gpt-oss", 2},      // GGUF's name
    {"gpt_oss", 2},      // config.json's
    {"llama", 0},        // Mistral v0.1 is converted to llama: no window
    {"mistral", 0},      //
    {"mixtral", 0},      //
    {"qwen2", 0},        // use_sliding_window/max_window_layers are not read
    {"qwen2_moe", 0},    //
    {"phi3", 0},         // "Phi SWA is currently disabled"
    {"starcoder2", 0},   //
    {"qwen3", 0},        //
}};

const WindowFamily* family_of(const std::string& architecture) {
  const auto it = std::find_if(kFamilies.begin(), kFamilies.end(),
                               [&](const WindowFamily& f) { return f.architecture == architecture; });
  return it == kFamilies.end() ? nullptr : &*it;
}

}  // namespace

void apply_window_rules(LlmModel& m, const std::vector<bool>* listed_layers, std::optional<uint64_t> listed_period) {
  m.window_rule.clear();
  if (m.sliding_window == 0) {
    m.swa_layers.clear();
    return;
  }
  const WindowFamily* family = family_of(m.architecture);
  if (family != nullptr && family->period == 0) {
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
  const uint64_t period = listed_period.value_or(family != nullptr ? family->period : 0);
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
