#include "cli/size_flag.h"
#include "cli/streams.h"

#include <cstdio>

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/common/units.h"

namespace gpumem::cli {

uint64_t parse_size_flag(std::string_view flag, const std::string& text, bool allow_zero) {
  const auto bytes = parse_bytes(text);
  if (!bytes || (*bytes == 0 && !allow_zero)) {
    throw InputError(fmt::format("{} '{}': not a {}byte count (e.g. 1048576B, 512MiB, 80GiB)", flag, printable(text),
                                 allow_zero ? "" : "positive "));
  }
  if (has_decimal_unit(text)) {
    std::fputs(
        fmt::format(
            "gpumem: note: {} {} is {} bytes ({}); a GPU sold as \"80GB\" has 80 GiB: write GiB for binary units\n",
            flag, printable(text), format_count(*bytes), format_bytes(*bytes))
            .c_str(),
        err());
  }
  return *bytes;
}

uint64_t parse_memory_flag(std::string_view flag, const std::string& text, bool allow_zero) {
  const bool bare = !text.empty() && text.find_first_not_of("0123456789.") == std::string::npos;
  const auto bytes = parse_bytes(text);
  if (bare && bytes && *bytes > 0) {
    // Small numbers are GiB forgotten; large ones are byte counts.
    const std::string guess = *bytes < 65536 ? text + "GiB" : fmt::format("{}B ({})", text, format_bytes(*bytes));
    throw InputError(fmt::format("{} {}: a size needs a unit: did you mean {}? (B for bytes, KiB, MiB, GiB, GB)", flag,
                                 printable(text), guess));
  }
  return parse_size_flag(flag, text, allow_zero);
}

}  // namespace gpumem::cli
