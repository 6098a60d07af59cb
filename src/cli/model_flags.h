#pragma once
// Flags that every model-reading subcommand shares: --batch, --batch-dim, --dim, --dtype,
// --weights-dtype, --activations-dtype.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "gpumem/model/inspect.h"

namespace gpumem::cli {

struct ModelFlags {
  std::optional<int64_t> batch;
  std::string batch_dim;          // --batch-dim NAME or AXIS
  std::vector<std::string> dims;  // NAME=VALUE
  std::string dtype, weights_dtype, activations_dtype;
};

void add_model_flags(CLI::App& cmd, ModelFlags& flags);
// --batch and --dim only, for commands that price tensors themselves.
void add_shape_flags(CLI::App& cmd, ModelFlags& flags);

// Throws InputError naming the flag when a value is malformed.
InspectOptions to_inspect_options(const ModelFlags& flags);

}  // namespace gpumem::cli
