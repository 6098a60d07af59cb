#pragma once
// Planning instances whose optimum is known by construction: a rectangle of
// height H (bytes) over time [0, T) is cut into pieces, and each piece is a
// buffer (its time span and its height). The pieces tile the rectangle, so
// H bytes are live at every moment: the lower bound is H, a packing of
// height H exists (the cut itself), and the optimum is exactly H. A solver
// proves such an instance optimal only by finding a perfect packing, which
// is what makes them hard (issue 17); MiniMalloc's suite has none this
// large.
#include <cstdint>
#include <string>
#include <vector>

#include "gpumem/plan/problem.h"

namespace gpumem::plan {

enum class CutShape : std::uint8_t {
  kGuillotine,  // recursive straight cuts, across time or across bytes, anywhere
  kStrips,      // horizontal strips (bytes), each cut along time at its own points
  kStaircase,   // guillotine, but pieces are long in time and thin in bytes near
                // the bottom and short and tall near the top, as activations and
                // weights are
  // Families from other generators (issue 29), for checking the planner on
  // instances it was not tuned on:
  kSpine,       // guillotine with sizes in 64-byte units and times in steps of
                // 1,024 or 256, then a tenth to a fifth of the pieces dropped,
                // except those across one time step (the spine), where all H
                // bytes stay live, so H is still the bound and the optimum
  kPinwheel,    // non-guillotine: rectangles split into five around a centre
                // (no straight cut divides them), mixed with straight cuts
  kEqualSizes,  // rows of one height, each cut in time: every buffer the same size
};

const char* to_string(CutShape shape);

struct PerfectPacking {
  Problem problem;
  std::vector<std::int64_t> offsets;  // the cut: a packing of height `height`
  std::int64_t height = 0;            // H: the optimum
};

// `buffers` pieces (at least 1) of a `height` x `time` rectangle, cut by
// `shape` from `seed`; sizes are multiples of `unit` bytes. Deterministic.
// kSpine sets its own unit (64), time (2^20) and time step, and keeps about
// `buffers` of the pieces it cuts; the others make exactly `buffers` pieces.
PerfectPacking perfect_packing(std::uint64_t seed, std::size_t buffers, CutShape shape,
                               std::int64_t height = std::int64_t{1} << 30, std::int64_t time = 10000,
                               std::int64_t unit = 512);

}  // namespace gpumem::plan
