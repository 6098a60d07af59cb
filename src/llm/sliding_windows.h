#pragma once
// Which layers of a model keep a sliding window, as llama.cpp runs it. A
// config's "sliding_window" does not say: Mistral 7B v0.1 names a window of
// 4,096 that llama.cpp never applies, and Gemma 2 names one that only every
// other layer uses. One table holds llama.cpp's rule per architecture.
#include <optional>
#include <vector>

#include "gpumem/llm/llm_model.h"

namespace gpumem::llm {

// Sets m.swa_layers and m.window_rule from m.sliding_window (as the file
// gives it), the layer list the file gives (Hugging Face's "layer_types"),
// when it gives one, and the period the file gives (Gemma 3's
// "sliding_window_pattern"). Where llama.cpp runs the architecture with full
// attention, m.sliding_window becomes 0 and the rule says so.
void apply_window_rules(LlmModel& m, const std::vector<bool>* listed_layers, std::optional<uint64_t> listed_period);

}  // namespace gpumem::llm
