#pragma once
// Memory sizes (--gpu, --overhead) as every subcommand takes them.
#include <cstdint>
#include <string>
#include <string_view>

namespace gpumem::cli {

// A byte count in any unit parse_bytes() reads; InputError naming the flag
// otherwise. Zero is refused unless `allow_zero`. A decimal unit ("80GB") is
// taken at its word, with a note on stderr giving the binary figure: a GPU
// sold as "80GB" has 80 GiB.
uint64_t parse_size_flag(std::string_view flag, const std::string& text, bool allow_zero = false);

// The same for memory (--gpu, --overhead), where a bare number is
// ambiguous: "24" is refused with "did you mean 24GiB?" and "1048576" with
// "did you mean 1048576B (1.00 MiB)?"; "24B" is bytes. Zero needs no unit.
uint64_t parse_memory_flag(std::string_view flag, const std::string& text, bool allow_zero = false);

}  // namespace gpumem::cli
