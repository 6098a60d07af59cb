#include "cli/capacity_flag.h"

#include <cstdio>

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/common/units.h"

namespace gpumem::cli {

uint64_t parse_capacity_flag(const std::string& text) {
  const auto bytes = parse_bytes(text);
  if (!bytes || *bytes == 0) {
    throw InputError(
        fmt::format("--capacity '{}': not a positive byte count (e.g. 1048576, 512MiB, 80GiB)", printable(text)));
  }
  if (has_decimal_unit(text)) {
    std::fprintf(stderr,
                 "gpumem: note: --capacity %s is %s bytes (%s); a GPU sold as \"80GB\" has 80 GiB: write GiB for "
                 "binary units\n",
                 printable(text).c_str(), format_count(*bytes).c_str(), format_bytes(*bytes).c_str());
  }
  return *bytes;
}

}  // namespace gpumem::cli
