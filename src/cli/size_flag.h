#pragma once
// Byte-size flags (--capacity, --overhead) as every subcommand takes them.
#include <cstdint>
#include <string>
#include <string_view>

namespace gpumem::cli {

// A byte count in any unit parse_bytes() reads; InputError naming the flag
// otherwise. Zero is refused unless `allow_zero`. A decimal unit ("80GB") is
// taken at its word, with a note on stderr giving the binary figure: a GPU
// sold as "80GB" has 80 GiB.
uint64_t parse_size_flag(std::string_view flag, const std::string& text, bool allow_zero = false);

// The same for a device's memory (--budget, --overhead), where a bare
// number is never meant as bytes: "24" is refused with a suggestion
// ("24GiB"); "24B" is bytes. Zero needs no unit.
uint64_t parse_memory_flag(std::string_view flag, const std::string& text, bool allow_zero = false);

inline uint64_t parse_capacity_flag(const std::string& text) { return parse_size_flag("--capacity", text); }

}  // namespace gpumem::cli
