#pragma once
// A series of any length drawn in a fixed number of columns: each column
// keeps the lowest, highest and last value of the points that fall in it.
// Drawing the lowest-to-highest band per pixel column shows every spike of
// a million-event trace in a few thousand numbers, and is computed as the
// points stream by (O(1) per point, no point stored).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpumem {

struct EnvelopeColumn {
  std::int64_t low = 0;
  std::int64_t high = 0;
  std::int64_t last = 0;  // the value at the column's end
  bool empty = true;      // no point fell in it
};

class Envelope {
 public:
  Envelope() = default;
  // Points with x in [x_begin, x_end) (others are clamped to the nearest
  // column), in `columns` equal columns: at least 1, at most one per x.
  Envelope(std::int64_t x_begin, std::int64_t x_end, std::size_t columns)
      : x_begin_(x_begin),
        x_end_(std::max(x_end, x_begin + 1)),
        columns_(std::clamp<std::size_t>(columns, 1, static_cast<std::size_t>(x_end_ - x_begin_))) {}

  void add(std::int64_t x, std::int64_t y) {
    EnvelopeColumn& c = columns_[column_of(x)];
    if (c.empty) {
      c.low = c.high = y;
      c.empty = false;
    } else {
      c.low = std::min(c.low, y);
      c.high = std::max(c.high, y);
    }
    c.last = y;
  }

  std::size_t column_of(std::int64_t x) const {
    if (x <= x_begin_) return 0;
    if (x >= x_end_) return columns_.size() - 1;
    // long double: exact for any int64 offset times a column count.
    const long double at = static_cast<long double>(x - x_begin_) * static_cast<long double>(columns_.size()) /
                           static_cast<long double>(x_end_ - x_begin_);
    return std::min(static_cast<std::size_t>(at), columns_.size() - 1);
  }
  // Where column i begins on the x axis: the smallest x that column_of()
  // puts in it.
  std::int64_t column_begin(std::size_t i) const {
    return x_begin_ + static_cast<std::int64_t>(
                          std::ceil(static_cast<long double>(x_end_ - x_begin_) * static_cast<long double>(i) /
                                    static_cast<long double>(columns_.size())));
  }
  std::int64_t x_begin() const { return x_begin_; }
  std::int64_t x_end() const { return x_end_; }

  // The columns as a step function: an empty column holds the value the
  // series had at the end of the column before it (`initial` before the
  // first point).
  std::vector<EnvelopeColumn> filled(std::int64_t initial = 0) const {
    std::vector<EnvelopeColumn> out = columns_;
    std::int64_t carried = initial;
    for (EnvelopeColumn& c : out) {
      if (c.empty)
        c.low = c.high = c.last = carried;
      else {
        // The step into the column's first point is part of it.
        c.low = std::min(c.low, carried);
        c.high = std::max(c.high, carried);
      }
      carried = c.last;
    }
    return out;
  }

 private:
  std::int64_t x_begin_ = 0;
  std::int64_t x_end_ = 1;
  std::vector<EnvelopeColumn> columns_ = std::vector<EnvelopeColumn>(1);
};

}  // namespace gpumem
