#pragma once
// --capacity as `plan` and `replay` take it.
#include <cstdint>
#include <string>

namespace gpumem::cli {

// A positive byte count in any unit parse_bytes() reads; InputError naming
// the flag otherwise. A decimal unit ("80GB") is taken at its word, with a
// note on stderr giving the binary figure: a GPU sold as "80GB" has 80 GiB.
uint64_t parse_capacity_flag(const std::string& text);

}  // namespace gpumem::cli
