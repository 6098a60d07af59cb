#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "gpumem/common/error.h"
#include "gpumem/weights/weight_file.h"

namespace gpumem::weights {

std::string write_safetensors(const std::vector<TensorData>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();  // keys sorted, as the reference writer's
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t at = 0;
  for (const auto& t : tensors) {
    uint64_t elements = 1;
    for (uint64_t d : t.shape) elements *= d;
    const uint64_t width = safetensors_dtype_bytes(t.dtype);
    if (width == 0 || elements * width != t.data.size()) {
      throw InputError(
          fmt::format("tensor '{}': {} bytes of data for {} {} values", t.name, t.data.size(), elements, t.dtype));
    }
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {at, at + t.data.size()}}};
    at += t.data.size();
  }
  std::string text = json_text(header);
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  std::string out(8, '\0');
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  out += text;
  for (const auto& t : tensors) out += t.data;
  return out;
}

}  // namespace gpumem::weights
