#pragma once
// The charts of gpumem's HTML pages (html/document.h draws them): lines,
// min/max envelopes and stacked areas over an x axis, and rectangles in
// time x offset. Each is drawn as inline SVG with a table of its numbers.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gpumem/common/envelope.h"

namespace gpumem::report::html {

// How many columns line charts keep (about one per pixel of a wide
// screen), and how many rectangles an arena picture draws one by one.
inline constexpr std::size_t kHtmlColumns = 1200;
inline constexpr std::size_t kHtmlMaxRects = 2000;

// One line of a chart. With low == high everywhere it is a plain line;
// otherwise the band between them is shaded (an envelope per column).
struct Series {
  std::string name;
  std::vector<double> x;
  std::vector<double> low;
  std::vector<double> high;
  bool dashed = false;
  // Series from an Envelope: one point per column, at the column's start.
  static Series from_envelope(std::string name, const Envelope& envelope, std::int64_t initial = 0);
  // A horizontal line from x_begin to x_end.
  static Series constant(std::string name, double value, double x_begin, double x_end);
};

struct Marker {
  double x = 0;
  std::string label;  // shown beside the line and on hover
};

// A vertical band (a phase of a training step, an iteration).
struct Band {
  double x_begin = 0;
  double x_end = 0;
  std::string label;
  bool highlight = false;  // drawn in a warm tint (recomputation), over the plain bands
};

struct LineChart {
  std::string id;  // element id, unique in the page
  std::string title;
  std::string x_label;
  std::string y_label;
  bool y_bytes = true;  // y ticks in KiB/MiB/GiB
  std::vector<Series> series;
  std::vector<Marker> markers;
  std::vector<Band> bands;
  bool stacked = false;  // series are stacked areas (each drawn on top of the ones before)
};

// A rectangle in time x offset (a buffer of a plan).
struct Rect {
  double x_begin = 0;
  double x_end = 0;
  double y_begin = 0;
  double y_end = 0;
  std::string tip;  // hover text: name, shape, size, lifetime
  int color = 0;    // index into the palette
};

struct RectChart {
  std::string id;
  std::string title;
  std::string x_label;
  std::string y_label;
  double x_max = 0;
  double y_max = 0;
  std::vector<Rect> rects;
  std::string note;  // under the chart ("the 2,000 largest of 31,000 buffers")
  // Table rows: one per rect, these columns (the first is the tip's name).
  std::vector<std::string> table_header;
  std::vector<std::vector<std::string>> table_rows;
};

}  // namespace gpumem::report::html
