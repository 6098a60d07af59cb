#pragma once
// The N largest activations, biggest first (ties: earliest tensor), shared by
// the text and JSON reports so both list the same tensors.
#include <algorithm>
#include <vector>

#include "gpumem/model/memory_analysis.h"

namespace gpumem::detail {

inline std::vector<const Activation*> largest_activations(const MemoryAnalysis& m, int top) {
  std::vector<const Activation*> all;
  all.reserve(m.activations.size());
  for (const auto& a : m.activations) all.push_back(&a);
  const size_t n = std::min(all.size(), static_cast<size_t>(std::max(top, 0)));
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n), all.end(),
                    [](const Activation* a, const Activation* b) {
                      return a->bytes != b->bytes ? a->bytes > b->bytes : a->tensor < b->tensor;
                    });
  all.resize(n);
  return all;
}

}  // namespace gpumem::detail
