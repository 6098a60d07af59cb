#pragma once
// Allocator statistics, named and defined as PyTorch's
// torch.cuda.memory_stats() names them, so dashboards and habits carry over.
#include <array>
#include <cstdint>
#include <map>
#include <string>

namespace gpumem::alloc {

// One quantity over time: its value now, its highest value since the last
// reset, and the running totals of increases and decreases.
struct Stat {
  std::int64_t current = 0;
  std::int64_t peak = 0;
  std::int64_t allocated = 0;
  std::int64_t freed = 0;

  void increase(std::int64_t amount) {
    current += amount;
    allocated += amount;
    if (current > peak) peak = current;
  }
  void decrease(std::int64_t amount) {
    current -= amount;
    freed += amount;
  }
  void reset_peak() { peak = current; }
  void reset_accumulated() {
    allocated = 0;
    freed = 0;
  }
};

// Which pool a quantity belongs to: PyTorch's "all", "small_pool",
// "large_pool" breakdown.
enum class PoolKind : std::uint8_t { kSmall = 0, kLarge = 1 };
inline constexpr int kStatAll = 0;
using StatArray = std::array<Stat, 3>;  // all, small_pool, large_pool

struct AllocatorStats {
  StatArray allocation;       // live allocations
  StatArray segment;          // segments reserved from the device
  StatArray active;           // allocated or waiting for a stream
  StatArray inactive_split;   // free blocks that are pieces of a segment
  StatArray allocated_bytes;  // bytes of live allocations (rounded)
  StatArray reserved_bytes;   // bytes held from the device
  StatArray active_bytes;
  StatArray inactive_split_bytes;
  StatArray requested_bytes;  // bytes callers asked for (unrounded)
  Stat oversize_allocations;  // allocations >= max_split_size
  Stat oversize_segments;
  std::int64_t num_alloc_retries = 0;  // allocations that freed cache and retried
  std::int64_t num_ooms = 0;
  std::int64_t num_sync_all_streams = 0;
  std::int64_t num_device_alloc = 0;  // upstream allocate or map calls
  std::int64_t num_device_free = 0;   // upstream deallocate or unmap calls
  std::int64_t max_split_size = 0;    // -1 when unlimited, as PyTorch reports

  // Flat map with PyTorch's key names: "allocated_bytes.all.current",
  // "segment.large_pool.peak", "num_alloc_retries", ...
  std::map<std::string, std::int64_t> flatten() const;
};

// torch.cuda.memory_summary()'s table: one row per statistic (and per pool),
// columns current, peak, total allocated, total freed; binary units.
std::string format_memory_summary(const AllocatorStats& stats);

// Adds `amount` to the "all" entry and to the pool's entry.
inline void increase(StatArray& stat, PoolKind pool, std::int64_t amount) {
  stat[kStatAll].increase(amount);
  stat[1 + static_cast<int>(pool)].increase(amount);
}
inline void decrease(StatArray& stat, PoolKind pool, std::int64_t amount) {
  stat[kStatAll].decrease(amount);
  stat[1 + static_cast<int>(pool)].decrease(amount);
}

}  // namespace gpumem::alloc
