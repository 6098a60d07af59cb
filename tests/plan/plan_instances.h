#pragma once
// Random planning instances for property tests.
#include <random>

#include "gpumem/plan/problem.h"

namespace gpumem::plan::test {

// Cuts a `time` x `height` rectangle by random guillotine cuts into `pieces`
// buffers: they tile it exactly, so the optimum is `height`.
inline Problem rectangle_cut(std::mt19937_64& rng, int pieces, int64_t time, int64_t height, int64_t unit = 1) {
  struct Rect {
    int64_t t0, t1, h0, h1;
  };
  std::vector<Rect> rects{{0, time, 0, height}};
  int guard = 0;
  while (static_cast<int>(rects.size()) < pieces && guard++ < pieces * 100) {
    const size_t i = rng() % rects.size();
    const Rect r = rects[i];
    if (rng() % 2 == 0 && r.t1 - r.t0 > 1) {
      const int64_t c = r.t0 + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(r.t1 - r.t0 - 1));
      rects[i] = {r.t0, c, r.h0, r.h1};
      rects.push_back({c, r.t1, r.h0, r.h1});
    } else if (r.h1 - r.h0 > 1) {
      const int64_t c = r.h0 + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(r.h1 - r.h0 - 1));
      rects[i] = {r.t0, r.t1, r.h0, c};
      rects.push_back({r.t0, r.t1, c, r.h1});
    }
  }
  Problem p;
  for (size_t i = 0; i < rects.size(); ++i) {
    p.buffers.push_back({std::to_string(i), rects[i].t0, rects[i].t1, (rects[i].h1 - rects[i].h0) * unit, 1, {}});
  }
  return p;
}

inline Problem random_problem(std::mt19937_64& rng, int n, int64_t horizon, int64_t max_size) {
  Problem p;
  for (int i = 0; i < n; ++i) {
    const int64_t a = static_cast<int64_t>(rng() % static_cast<uint64_t>(horizon));
    const int64_t len = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(horizon / 2 + 1));
    p.buffers.push_back({"b" + std::to_string(i), a, a + len, 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(max_size)),
                         1, {}});
  }
  return p;
}

}  // namespace gpumem::plan::test
