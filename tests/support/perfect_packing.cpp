#include "support/perfect_packing.h"

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

// Non-guillotine: a piece split into five around a centre (a pinwheel)
// about half the time, else a straight cut, always the largest piece,
// until there are `count` pieces.
std::vector<Piece> pinwheels(std::mt19937_64& rng, std::size_t count, std::int64_t height, std::int64_t time,
                             std::int64_t unit) {
  std::vector<Piece> pieces{{0, time, 0, height}};
  const auto area = [](const Piece& p) {
    return static_cast<long double>(p.span()) * static_cast<long double>(p.bytes());
  };
  while (pieces.size() < count) {
    auto it = std::max_element(pieces.begin(), pieces.end(),
                               [&](const Piece& a, const Piece& b) { return area(a) < area(b); });
    const Piece p = *it;
    std::int64_t x1 = cut_point(rng, p.t0, p.t1, 1), x2 = cut_point(rng, p.t0, p.t1, 1);
    std::int64_t y1 = cut_point(rng, p.b0, p.b1, unit), y2 = cut_point(rng, p.b0, p.b1, unit);
    if (x1 > x2) std::swap(x1, x2);
    if (y1 > y2) std::swap(y1, y2);
    if (pieces.size() + 4 <= count && rng() % 2 == 0 && x1 >= 0 && y1 >= 0 && x1 < x2 && y1 < y2) {
      *it = {p.t0, x2, p.b0, y1};              // bottom left, to the centre's right edge
      pieces.push_back({x2, p.t1, p.b0, y2});  // bottom right, up to the centre's top
      pieces.push_back({x1, p.t1, y2, p.b1});  // top right, from the centre's left edge
      pieces.push_back({p.t0, x1, y1, p.b1});  // top left, down to the centre's bottom
      pieces.push_back({x1, x2, y1, y2});      // the centre
      continue;
    }
    std::vector<Piece> two = guillotine(rng, {p}, 2, unit, false, height);
    if (two.size() < 2) break;
    *it = two[0];
    pieces.push_back(two[1]);
  }
  return pieces;
}

// Rows between consecutive `bounds` (bytes), each cut along time into its
// share of `count` pieces.
std::vector<Piece> cut_rows(std::mt19937_64& rng, std::size_t count, const std::vector<std::int64_t>& bounds,
                            std::int64_t time) {
  std::vector<Piece> pieces;
  const std::size_t rows = bounds.size() - 1;
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t share = count / rows + (r < count % rows ? 1 : 0);
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

// Rows of one height, each cut in time into its share of pieces.
std::vector<Piece> equal_rows(std::mt19937_64& rng, std::size_t count, std::int64_t height, std::int64_t time,
                              std::int64_t unit) {
  const std::size_t rows = std::clamp<std::size_t>(count / 16, 1, static_cast<std::size_t>(height / unit));
  const std::int64_t row = height / static_cast<std::int64_t>(rows) / unit * unit;
  std::vector<std::int64_t> bounds;
  for (std::size_t r = 0; r <= rows; ++r) bounds.push_back(static_cast<std::int64_t>(r) * row);
  return cut_rows(rng, count, bounds, time);
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
  return cut_rows(rng, count, bounds, time);
}

}  // namespace

const char* to_string(CutShape shape) {
  switch (shape) {
    case CutShape::kGuillotine: return "guillotine";
    case CutShape::kStrips: return "strips";
    case CutShape::kStaircase: return "staircase";
    case CutShape::kSpine: return "spine";
    case CutShape::kPinwheel: return "pinwheel";
    case CutShape::kEqualSizes: return "equal-sizes";
  }
  return "?";
}

PerfectPacking perfect_packing(std::uint64_t seed, std::size_t buffers, CutShape shape, std::int64_t height,
                               std::int64_t time, std::int64_t unit) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(shape));
  std::int64_t step = 1;  // of time
  double drop = 0;
  if (shape == CutShape::kSpine) {
    unit = 64;
    time = std::int64_t{1} << 20;
    step = rng() % 2 == 0 ? 1024 : 256;
    drop = 0.1 + 0.1 * static_cast<double>(rng() % 1000) / 1000.0;
  }
  height = std::max(unit, height / unit * unit);
  const std::size_t count = std::max<std::size_t>(
      static_cast<std::size_t>(std::llround(static_cast<double>(std::max<std::size_t>(buffers, 1)) / (1 - drop))), 1);
  const std::vector<Piece> whole{{0, time / step, 0, height}};
  std::vector<Piece> pieces;
  switch (shape) {
    case CutShape::kStrips: pieces = strips(rng, count, height, time, unit); break;
    case CutShape::kPinwheel: pieces = pinwheels(rng, count, height, time, unit); break;
    case CutShape::kEqualSizes: pieces = equal_rows(rng, count, height, time, unit); break;
    default: pieces = guillotine(rng, whole, count, unit, shape == CutShape::kStaircase, height);
  }
  if (step > 1) {
    // Cut in steps, then stretched: every time is a multiple of the step.
    for (Piece& p : pieces) p.t0 *= step, p.t1 *= step;
  }
  if (drop > 0) {
    // The spine: one time step every kept piece crosses keeps H live.
    const std::int64_t spine = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(time / step)) * step;
    std::vector<Piece> kept;
    for (const Piece& p : pieces) {
      const bool across = p.t0 <= spine && spine < p.t1;
      if (across || static_cast<double>(rng() % 1000) >= drop * 1000) kept.push_back(p);
    }
    pieces = std::move(kept);
  }
  // The solver sees the buffers in a shuffled order, not the cut's.
  std::shuffle(pieces.begin(), pieces.end(), rng);
  PerfectPacking out;
  // The cut's top: below `height` when equal rows do not divide it.
  for (const Piece& p : pieces) out.height = std::max(out.height, p.b1);
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
