#pragma once
// The smallest arena over every assignment of offsets, for tiny problems:
// the reference the exact searches are held to.
#include <algorithm>
#include <functional>

#include "gpumem/plan/problem.h"

namespace gpumem::plan::test {

// `collide(x, ox, y, oy)`: whether buffers x at offset ox and y at oy share a
// byte at some time; the caller's own definition, so the reference shares
// no code with the planner.
template <class Collide>
int64_t brute_force_arena(const Problem& p, Collide collide) {
  // Stacking everything above the pinned buffers, each aligned, always fits:
  // no optimum is larger, so no offset beyond it needs trying.
  int64_t bound = 0;
  for (const auto& b : p.buffers) {
    if (b.fixed_offset) bound = std::max(bound, *b.fixed_offset + b.size);
  }
  for (const auto& b : p.buffers) bound += b.size + b.alignment;
  std::vector<int64_t> offsets(p.buffers.size(), 0);
  int64_t best = bound + 1;
  std::function<void(size_t, int64_t)> go = [&](size_t i, int64_t arena) {
    if (arena >= best) return;
    if (i == p.buffers.size()) {
      best = arena;
      return;
    }
    const auto& b = p.buffers[i];
    for (int64_t o = 0; o + b.size < best; o += b.alignment) {
      if (b.fixed_offset && o != *b.fixed_offset) continue;
      bool clash = false;
      for (size_t j = 0; j < i && !clash; ++j) clash = collide(b, o, p.buffers[j], offsets[j]);
      if (clash) continue;
      offsets[i] = o;
      go(i + 1, std::max(arena, o + b.size));
    }
  };
  go(0, 0);
  return best;
}

}  // namespace gpumem::plan::test
