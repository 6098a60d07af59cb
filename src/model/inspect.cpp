#include "gpumem/model/inspect.h"

namespace gpumem {

InspectResult inspect_model(const std::filesystem::path& path, const InspectOptions& options) {
  InspectResult r;
  r.model = load_onnx_model(path, options.load);
  r.memory = analyze_memory(r.model.graph, options.pricing);
  return r;
}

}  // namespace gpumem
