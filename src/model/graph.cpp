#include "gpumem/model/graph.h"

#include <limits>

namespace gpumem {

std::optional<uint64_t> Tensor::elements() const {
  if (!dims) return std::nullopt;
  uint64_t n = 1;
  for (const auto& d : *dims) {
    if (!d.known()) return std::nullopt;
    const auto v = static_cast<uint64_t>(d.value);
    if (v != 0 && n > std::numeric_limits<uint64_t>::max() / v) return std::nullopt;
    n *= v;
  }
  return n;
}

std::string Tensor::shape_string() const {
  if (!dims) return "?";
  std::string s = "[";
  for (size_t i = 0; i < dims->size(); ++i) {
    if (i) s += ",";
    const auto& d = (*dims)[i];
    s += d.known() ? std::to_string(d.value) : (d.param.empty() ? "?" : d.param);
  }
  return s + "]";
}

int Graph::find(const std::string& tensor_name) const {
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].name == tensor_name) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace gpumem
