#pragma once
// Size arithmetic every allocator of src/alloc shares.
#include <cstddef>

namespace gpumem::alloc {

// Requests and limits beyond this are refused rather than rounded, so that
// no size arithmetic can overflow.
inline constexpr std::size_t kMaxBytes = std::size_t{1} << 60;

// `n` rounded up to a multiple of `unit`.
template <typename T>
constexpr T round_up(T n, T unit) {
  return (n + unit - 1) / unit * unit;
}

}  // namespace gpumem::alloc
