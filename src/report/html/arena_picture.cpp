#include "report/html/arena_picture.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "gpumem/common/units.h"

namespace gpumem::report::html {

RectChart arena_chart(const std::string& id, const std::string& title, const std::string& x_label,
                      const plan::Problem& problem, const std::vector<std::int64_t>& offsets,
                      const std::function<std::string(std::size_t)>& describe, std::size_t max_rects,
                      const std::function<int(std::size_t)>& color) {
  RectChart chart;
  chart.id = id;
  chart.title = title;
  chart.x_label = x_label;
  chart.y_label = "offset in the arena";
  const std::size_t n = std::min(problem.buffers.size(), offsets.size());
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  const auto area = [&](std::size_t i) {
    const plan::Buffer& b = problem.buffers[i];
    return static_cast<long double>(b.size) * static_cast<long double>(std::max<std::int64_t>(1, b.upper - b.lower));
  };
  if (n > max_rects) {
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(max_rects), order.end(),
                      [&](std::size_t a, std::size_t b) { return area(a) > area(b); });
    order.resize(max_rects);
    chart.note = fmt::format(
        "The {} largest of {} buffers by bytes x lifetime; the others are in the arena too, "
        "too small to see.",
        format_count(max_rects), format_count(n));
  }
  std::sort(order.begin(), order.end());
  chart.table_header = {"buffer", "offset", "bytes", "from", "to"};
  for (std::size_t i : order) {
    const plan::Buffer& b = problem.buffers[i];
    chart.x_max = std::max(chart.x_max, static_cast<double>(b.upper));
    chart.y_max = std::max(chart.y_max, static_cast<double>(offsets[i] + b.size));
    const std::string name = describe(i);
    chart.rects.push_back(
        {static_cast<double>(b.lower), static_cast<double>(b.upper), static_cast<double>(offsets[i]),
         static_cast<double>(offsets[i] + b.size),
         fmt::format("{}\n{} at offset {}\nlive [{}, {})", name, format_bytes(static_cast<std::uint64_t>(b.size)),
                     format_count(static_cast<std::uint64_t>(offsets[i])), b.lower, b.upper),
         color ? color(i) : static_cast<int>(i % 10)});
    chart.table_rows.push_back(
        {name, std::to_string(offsets[i]), std::to_string(b.size), std::to_string(b.lower), std::to_string(b.upper)});
  }
  // The arena's top is the plan's, even when only some buffers are drawn.
  for (std::size_t i = 0; i < n; ++i) {
    chart.y_max = std::max(chart.y_max, static_cast<double>(offsets[i] + problem.buffers[i].size));
    chart.x_max = std::max(chart.x_max, static_cast<double>(problem.buffers[i].upper));
  }
  return chart;
}

}  // namespace gpumem::report::html
