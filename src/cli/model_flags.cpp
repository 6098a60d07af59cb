#include "cli/model_flags.h"

#include <charconv>

#include <fmt/format.h>

#include "cli/flags.h"
#include "gpumem/common/error.h"

namespace gpumem::cli {
namespace {

std::optional<DType> dtype_flag(const std::string& flag, const std::string& value) {
  if (value.empty()) return std::nullopt;
  const auto t = parse_dtype(value);
  if (!t)
    throw InputError(
        fmt::format("{} {}: unknown type (use fp32 or f32, fp16 or f16, bf16, int8, fp8 or int4)", flag, value));
  return t;
}

}  // namespace

void add_shape_flags(CLI::App& cmd, ModelFlags& flags) {
  cmd.add_option("--batch", flags.batch,
                 "Bind the batch axis of every data input (a dynamic axis named like batch, else the one they share, "
                 "else the first: --batch-dim chooses)")
      ->check(kPositiveInteger);
  cmd.add_option("--batch-dim", flags.batch_dim,
                 "Which axis is the batch: a symbolic dimension's name, or an axis index (1 for [seq, batch] inputs)");
  add_list_option(cmd, "--dim", flags.dims, "Bind a symbolic dimension", "NAME=VALUE");
}

void add_model_flags(CLI::App& cmd, ModelFlags& flags) {
  add_shape_flags(cmd, flags);
  cmd.add_option("--dtype", flags.dtype,
                 "Price floating weights and activations as this type (fp32|fp16|bf16|int8...)");
  cmd.add_option("--weights-dtype", flags.weights_dtype, "Price floating weights as this type");
  cmd.add_option("--activations-dtype", flags.activations_dtype, "Price floating activations as this type");
}

InspectOptions to_inspect_options(const ModelFlags& flags) {
  InspectOptions o;
  o.load.batch = flags.batch;
  o.load.batch_dim = flags.batch_dim;
  for (const auto& d : flags.dims) {
    const auto eq = d.find('=');
    if (eq == std::string::npos || eq == 0) throw InputError(fmt::format("--dim {}: expected NAME=VALUE", d));
    int64_t value = 0;
    const char* begin = d.data() + eq + 1;
    const char* end = d.data() + d.size();
    const auto [ptr, ec] = std::from_chars(begin, end, value);
    if (ec != std::errc() || ptr != end || begin == end) {
      throw InputError(fmt::format("--dim {}: '{}' is not an integer", d, std::string(begin, end)));
    }
    o.load.dims[d.substr(0, eq)] = value;
  }
  const auto both = dtype_flag("--dtype", flags.dtype);
  o.pricing.weights_as = both;
  o.pricing.activations_as = both;
  if (auto w = dtype_flag("--weights-dtype", flags.weights_dtype)) o.pricing.weights_as = w;
  if (auto a = dtype_flag("--activations-dtype", flags.activations_dtype)) o.pricing.activations_as = a;
  return o;
}

}  // namespace gpumem::cli
