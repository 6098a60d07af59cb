#pragma once
// Static memory planning: every buffer's size and lifetime are known ahead;
// find an offset for each in one arena so that buffers alive at the same time
// never overlap, with the arena as small as possible.
//
// This is the problem MiniMalloc (Moffitt, ASPLOS 2023) solves, and the CSV
// format is the one its benchmarks use: `id,lower,upper,size` with optional
// `alignment`, `gaps` and `offset` columns.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpumem::plan {

// Bytes [lower, upper) of a buffer, counted from its offset.
struct Window {
  int64_t lower = 0;
  int64_t upper = 0;
  bool operator==(const Window&) const = default;
};

// A time span [lower, upper) inside a buffer's lifetime during which it holds
// nothing (no window) or only the bytes of its window: MiniMalloc's gaps. A
// buffer whose value is dead between two uses, or that is read in pieces,
// lends that space to others while keeping its offset.
struct Gap {
  int64_t lower = 0;
  int64_t upper = 0;
  std::optional<Window> window;
  bool operator==(const Gap&) const = default;
};

struct Buffer {
  std::string id;
  int64_t lower = 0;  // lifetime [lower, upper), half-open
  int64_t upper = 0;
  int64_t size = 0;
  int64_t alignment = 1;               // the offset must be a multiple of this
  std::optional<int64_t> fixed_offset;  // pinned by the caller
  // In time order, disjoint, each non-empty and inside [lower, upper)
  // (gap_error() says what breaks that); windows within [0, size].
  std::vector<Gap> gaps = {};

  // Whether the lifetimes intersect (an empty lifetime intersects nothing).
  // Without gaps this is when two buffers conflict; with gaps it is only
  // necessary: what they occupy (occupancy()) must meet as well.
  bool overlaps_in_time(const Buffer& o) const {
    return lower < upper && o.lower < o.upper && lower < o.upper && o.lower < upper;
  }
};

struct Problem {
  std::vector<Buffer> buffers;
  bool has_gaps() const;
};

// One rectangle of what a buffer occupies: during time [lower, upper), bytes
// [begin, end) counted from its offset.
struct Occupancy {
  int64_t lower = 0, upper = 0;
  int64_t begin = 0, end = 0;
};

// What the buffer occupies, in time order: its lifetime less its gaps, at
// full size, plus the non-empty windows of its gaps. Nothing for a buffer of
// no size or no lifetime. The gaps must be well formed (gap_error()).
std::vector<Occupancy> occupancy(const Buffer& buffer);

// Calls meet(p, q) for every rectangle p of `x` and q of `y` that share a
// moment; both in time order, as occupancy() gives them. Linear in their
// counts: a walk through both lists, like a merge.
template <class Meet>
void for_each_meeting(const std::vector<Occupancy>& x, const std::vector<Occupancy>& y, Meet&& meet) {
  size_t i = 0, j = 0;
  while (i < x.size() && j < y.size()) {
    if (x[i].lower < y[j].upper && y[j].lower < x[i].upper) meet(x[i], y[j]);
    if (x[i].upper <= y[j].upper) {
      ++i;
    } else {
      ++j;
    }
  }
}

// Why the buffer's gaps are malformed (out of order, overlapping, empty,
// outside the lifetime, a window outside [0, size] or upside down), or
// nullopt when they are fine.
std::optional<std::string> gap_error(const Buffer& buffer);

// Throws InputError naming the first buffer whose gaps are malformed.
void check_gaps(const Problem& problem);

// Offsets parallel to Problem::buffers.
struct Plan {
  std::vector<int64_t> offsets;
  int64_t arena = 0;  // max over buffers of offset + size (0 for no buffers)
};

// The largest sum of bytes occupied at one time (sizes, or window widths in
// gaps): no plan is smaller.
int64_t lower_bound(const Problem& problem);

// max(offset + size).
int64_t arena_size(const Problem& problem, const std::vector<int64_t>& offsets);

}  // namespace gpumem::plan
