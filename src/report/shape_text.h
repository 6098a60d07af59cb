#pragma once
// A tensor's shape as the text reports print it: "[4096,128256]".
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace gpumem::report {

inline std::string shape_text(const std::vector<uint64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ",")); }

}  // namespace gpumem::report
