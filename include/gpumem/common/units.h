#pragma once
// Byte quantities for people: binary units (KiB, MiB, GiB) in human output,
// exact bytes everywhere a program reads the output.
#include <cstdint>
#include <string>

namespace gpumem {

// "0 B", "512 B", "1.50 KiB", "97.66 MiB", "1.00 GiB": three significant
// decimals are enough to compare; exact figures belong in JSON.
std::string format_bytes(uint64_t bytes);

// "1,234,567": grouped digits for large counts in human output.
std::string format_count(uint64_t n);

}  // namespace gpumem
