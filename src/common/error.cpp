#include "gpumem/common/error.h"

#include <cstdio>

namespace gpumem {

namespace {

void append_escaped(std::string& out, std::string_view text) {
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out.push_back(ch);
    }
  }
}

}  // namespace

std::string printable(std::string_view name) {
  constexpr size_t kMaxShown = 120;
  std::string out;
  append_escaped(out, name.substr(0, kMaxShown));
  if (name.size() > kMaxShown) out += "...";
  return out;
}

std::string one_line(std::string_view message) {
  std::string out;
  append_escaped(out, message);
  return out;
}

}  // namespace gpumem
