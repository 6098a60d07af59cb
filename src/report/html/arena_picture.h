#pragma once
// A plan's buffers as rectangles in time x offset, shared by the model,
// plan and trace pages.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gpumem/plan/problem.h"
#include "gpumem/report/html/charts.h"

namespace gpumem::report::html {

// Every buffer when there are at most `max_rects`, else the largest by area
// (bytes x lifetime), said in the note. `describe(i)` names buffer i (the
// tip's first line and the table's first column); `color(i)`, when given,
// picks its palette entry (else buffers cycle through the palette).
RectChart arena_chart(const std::string& id, const std::string& title, const std::string& x_label,
                      const plan::Problem& problem, const std::vector<std::int64_t>& offsets,
                      const std::function<std::string(std::size_t)>& describe, std::size_t max_rects,
                      const std::function<int(std::size_t)>& color = {});

}  // namespace gpumem::report::html
