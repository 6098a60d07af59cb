#pragma once
// Static memory planning: every buffer's size and lifetime are known ahead;
// find an offset for each in one arena so that buffers alive at the same time
// never overlap, with the arena as small as possible.
//
// This is the problem MiniMalloc (Moffitt, ASPLOS 2023) solves, and the CSV
// format is the one its benchmarks use: `id,lower,upper,size` with optional
// `alignment` and `offset` columns.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpumem::plan {

struct Buffer {
  std::string id;
  int64_t lower = 0;  // lifetime [lower, upper), half-open
  int64_t upper = 0;
  int64_t size = 0;
  int64_t alignment = 1;               // the offset must be a multiple of this
  std::optional<int64_t> fixed_offset;  // pinned by the caller

  // Two buffers conflict when their lifetimes intersect (an empty lifetime
  // intersects nothing).
  bool overlaps_in_time(const Buffer& o) const {
    return lower < upper && o.lower < o.upper && lower < o.upper && o.lower < upper;
  }
};

struct Problem {
  std::vector<Buffer> buffers;
};

// Offsets parallel to Problem::buffers.
struct Plan {
  std::vector<int64_t> offsets;
  int64_t arena = 0;  // max over buffers of offset + size (0 for no buffers)
};

// The largest sum of sizes of buffers alive at one time: no plan is smaller.
int64_t lower_bound(const Problem& problem);

// max(offset + size).
int64_t arena_size(const Problem& problem, const std::vector<int64_t>& offsets);

}  // namespace gpumem::plan
