#include "gpumem/plan/perfect_packing.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace gpumem::plan {
namespace {

struct Piece {
  std::int64_t t0, t1;  // time [t0, t1)
  std::int64_t b0, b1;  // bytes [b0, b1)
  std::int64_t span() const { return t1 - t0; }
  std::int64_t bytes() const { return b1 - b0; }
};

// A cut point strictly inside (lo, hi), a multiple of `step` from lo; -1
// when there is none.
std::int64_t cut_point(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi, std::int64_t step) {
  const std::int64_t slots = (hi - lo) / step;
  if (slots < 2) return -1;
  return lo + step * static_cast<std::int64_t>(1 + rng() % static_cast<std::uint64_t>(slots - 1));
}

// Splits the largest piece (by area) in two, across time or bytes, until
// there are `count` pieces or none can be split.
std::vector<Piece> guillotine(std::mt19937_64& rng, std::vector<Piece> pieces, std::size_t count, std::int64_t unit,
                              bool staircase, std::int64_t height) {
  const auto area = [](const Piece& p) {
    return static_cast<long double>(p.span()) * static_cast<long double>(p.bytes());
  };
  while (pieces.size() < count) {
    auto it = std::max_element(pieces.begin(), pieces.end(),
                               [&](const Piece& a, const Piece& b) { return area(a) < area(b); });
    Piece p = *it;
    // Across time or across bytes: the longer side (relative to the
    // rectangle) more often; a staircase cuts low pieces across bytes
    // (long and thin) and high ones across time (short and tall).
    bool across_time = rng() % 2 == 0;
    if (staircase) {
      const double depth = static_cast<double>(p.b0) / static_cast<double>(height);
      across_time = static_cast<double>(rng() % 1000) / 1000.0 < depth;
    }
    std::int64_t at = across_time ? cut_point(rng, p.t0, p.t1, 1) : cut_point(rng, p.b0, p.b1, unit);
    if (at < 0) {
      across_time = !across_time;
      at = across_time ? cut_point(rng, p.t0, p.t1, 1) : cut_point(rng, p.b0, p.b1, unit);
    }
    if (at < 0) break;  // every piece is one time step by one unit
    Piece q = p;
    if (across_time) {
      p.t1 = at;
      q.t0 = at;
    } else {
      p.b1 = at;
      q.b0 = at;
    }
    *it = p;
    pieces.push_back(q);
  }
  return pieces;
}

std::vector<Piece> strips(std::mt19937_64& rng, std::size_t count, std::int64_t height, std::int64_t time,
                          std::int64_t unit) {
  // About sqrt(count) strips, each cut along time into its share of pieces.
  const std::size_t rows = std::max<std::size_t>(1, static_cast<std::size_t>(std::sqrt(static_cast<double>(count))));
  std::vector<std::int64_t> bounds{0, height};
  while (bounds.size() < rows + 1) {
    const std::int64_t at = cut_point(rng, 0, height, unit);
    if (at < 0) break;
    if (std::find(bounds.begin(), bounds.end(), at) == bounds.end()) bounds.push_back(at);
  }
  std::sort(bounds.begin(), bounds.end());
  std::vector<Piece> pieces;
  const std::size_t strip_count = bounds.size() - 1;
  for (std::size_t r = 0; r < strip_count; ++r) {
    const std::size_t share = count / strip_count + (r < count % strip_count ? 1 : 0);
    std::vector<std::int64_t> cuts{0, time};
    while (cuts.size() < share + 1 && static_cast<std::int64_t>(cuts.size()) < time) {
      const std::int64_t at = cut_point(rng, 0, time, 1);
      if (at >= 0 && std::find(cuts.begin(), cuts.end(), at) == cuts.end()) cuts.push_back(at);
    }
    std::sort(cuts.begin(), cuts.end());
    for (std::size_t c = 0; c + 1 < cuts.size(); ++c)
      pieces.push_back({cuts[c], cuts[c + 1], bounds[r], bounds[r + 1]});
  }
  return pieces;
}

}  // namespace

const char* to_string(CutShape shape) {
  switch (shape) {
    case CutShape::kGuillotine: return "guillotine";
    case CutShape::kStrips: return "strips";
    case CutShape::kStaircase: return "staircase";
  }
  return "?";
}

PerfectPacking perfect_packing(std::uint64_t seed, std::size_t buffers, CutShape shape, std::int64_t height,
                               std::int64_t time, std::int64_t unit) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(shape));
  height = std::max(unit, height / unit * unit);
  const std::vector<Piece> whole{{0, time, 0, height}};
  std::vector<Piece> pieces =
      shape == CutShape::kStrips
          ? strips(rng, std::max<std::size_t>(buffers, 1), height, time, unit)
          : guillotine(rng, whole, std::max<std::size_t>(buffers, 1), unit, shape == CutShape::kStaircase, height);
  // The solver sees the buffers in a shuffled order, not the cut's.
  std::shuffle(pieces.begin(), pieces.end(), rng);
  PerfectPacking out;
  out.height = height;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    Buffer b;
    b.id = std::to_string(i);
    b.lower = pieces[i].t0;
    b.upper = pieces[i].t1;
    b.size = pieces[i].bytes();
    out.problem.buffers.push_back(std::move(b));
    out.offsets.push_back(pieces[i].b0);
  }
  return out;
}

}  // namespace gpumem::plan
