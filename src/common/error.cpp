#include "gpumem/common/error.h"

#include <cstdio>

namespace gpumem {

std::string printable(std::string_view name) {
  constexpr size_t kMaxShown = 120;
  std::string out;
  for (size_t i = 0; i < name.size() && i < kMaxShown; ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (name.size() > kMaxShown) out += "...";
  return out;
}

}  // namespace gpumem
