#pragma once
// Byte quantities for people: binary units (KiB, MiB, GiB) in human output,
// exact bytes everywhere a program reads the output.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpumem {

// a / b rounded up: whole blocks, pages or cells holding `a` things.
constexpr uint64_t div_up(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// "0 B", "512 B", "1.50 KiB", "97.66 MiB", "1.00 GiB": three significant
// decimals are enough to compare; exact figures belong in JSON.
std::string format_bytes(uint64_t bytes);

// "1,234,567": grouped digits for large counts in human output.
std::string format_count(uint64_t n);

// Parses a byte count as users write it: "1048576", "512KiB", "16GiB",
// "16Gi", "16G", "1.5 GiB", "20MB". K, M, G, T with or without "i" are
// binary, as Docker, Slurm and `ls -h` mean them; KB, MB, GB, TB are powers
// of 1000. nullopt if malformed or beyond 2^62.
std::optional<uint64_t> parse_bytes(std::string_view text);

// Parses a token count as users write a context length: "8192", "8k",
// "128K", "1.5k", "1M". k and M are binary (8k = 8192; Llama 3.1's "128k"
// context is 131072). nullopt if malformed, fractional or past 2^32 - 1.
std::optional<uint64_t> parse_tokens(std::string_view text);

// Whether `text` ends in a decimal unit (KB, MB, GB, TB): 1000-based, where
// GPU memory is sold in 1024-based units under the same names.
bool has_decimal_unit(std::string_view text);

// Parses a duration as Prometheus and Go write them: "1s", "500ms", "2m",
// "1.5s", "250us", "100ns", "1h". nullopt if malformed, negative or beyond a
// day.
std::optional<std::chrono::nanoseconds> parse_duration(std::string_view text);

}  // namespace gpumem
