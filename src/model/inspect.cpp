#include "gpumem/model/inspect.h"
#include "gpumem/common/flag_names.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpumem/common/error.h"

namespace gpumem {

InspectResult inspect_model(const std::filesystem::path& path, const InspectOptions& options) {
  InspectResult r;
  r.model = load_onnx_model(path, options.load);
  r.memory = analyze_memory(r.model.graph, options.pricing);
  return r;
}

void require_bound_dimensions(const Model& model) {
  const auto& dims = model.notes.unbound_dims;
  if (dims.empty()) return;
  std::vector<std::string> example;
  for (const auto& d : dims) example.push_back(d + "=N");
  throw InputError(fmt::format("{}: symbolic dimension{} {} {} not bound: give {} with " GPUMEM_FLAG_DIM
                               " {} (or " GPUMEM_FLAG_BATCH " N for the "
                               "batch axis)",
                               printable(model.path), dims.size() == 1 ? "" : "s", fmt::join(dims, ", "),
                               dims.size() == 1 ? "is" : "are", dims.size() == 1 ? "its size" : "their sizes",
                               fmt::join(example, ",")));
}

}  // namespace gpumem
