#pragma once
// What the GGUF reader and writer agree on about the file's layout.
#include <cstdint>

namespace gpumem::weights::gguf_layout {

// GGUF_DEFAULT_ALIGNMENT: tensor data starts at multiples of this unless
// general.alignment says otherwise.
inline constexpr uint64_t kDefaultAlignment = 32;

inline uint64_t align_up(uint64_t n, uint64_t alignment) { return n + (alignment - n % alignment) % alignment; }

}  // namespace gpumem::weights::gguf_layout
