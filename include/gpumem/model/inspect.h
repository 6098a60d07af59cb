#pragma once
// `gpumem inspect`: load a model and account for its memory, in one call.
#include <filesystem>

#include "gpumem/model/memory_analysis.h"
#include "gpumem/model/onnx_loader.h"

namespace gpumem {

struct InspectOptions {
  LoadOptions load;
  PricingOptions pricing;
};

struct InspectResult {
  Model model;
  MemoryAnalysis memory;
};

InspectResult inspect_model(const std::filesystem::path& path, const InspectOptions& options = {});

// The commands' rule: a model whose inputs keep symbolic dimensions has no
// sizes to report, so InputError names them and the flags that bind them.
void require_bound_dimensions(const Model& model);

}  // namespace gpumem
