// Line charts (plain, enveloped or stacked) and rectangle charts (time x
// offset) as inline SVG, each followed by a table of its numbers.
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "gpumem/common/units.h"
#include "gpumem/report/html/charts.h"
#include "gpumem/report/html/document.h"

namespace gpumem::report::html {
namespace {

// The plot area inside a 960 x 340 view box: room on the left for the
// y ticks, on the right for the legend.
constexpr double kWidth = 960, kHeight = 340;
constexpr double kLeft = 78, kRight = 720, kTop = 16, kBottom = 300;
constexpr int kPalette = 8;

struct Scale {
  double x0, x1, y0, y1;
  double px(double x) const { return x1 > x0 ? kLeft + (x - x0) * (kRight - kLeft) / (x1 - x0) : kLeft; }
  double py(double y) const { return y1 > y0 ? kBottom - (y - y0) * (kBottom - kTop) / (y1 - y0) : kBottom; }
};

std::string num(double v) { return fmt::format("{:.1f}", v); }

// Where each marker's label goes, so that no two overlap (issue 46: several
// policies running out of memory at nearby events wrote over one another).
// A label sits right of its line, or left of it where it would leave the
// plot; labels take the first row, from the top, where they clear the
// labels already there. Widths are estimated at 6.2 px a character of the
// 11 px font, which holds for the digits and lower case the labels use.
struct MarkerLabel {
  double line_x = 0, text_x = 0, text_y = 0;
  bool anchor_end = false;
  std::string label;
};

std::vector<MarkerLabel> marker_labels(const std::vector<Marker>& markers, const Scale& s) {
  constexpr double kCharWidth = 6.2, kRowHeight = 14, kGap = 6;
  std::vector<std::size_t> order(markers.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return markers[a].x < markers[b].x; });
  std::vector<std::vector<std::pair<double, double>>> rows;  // the spans taken in each row
  std::vector<MarkerLabel> out;
  for (const std::size_t i : order) {
    MarkerLabel m;
    m.label = markers[i].label;
    m.line_x = s.px(markers[i].x);
    const double width = kCharWidth * static_cast<double>(m.label.size());
    m.anchor_end = m.line_x + 4 + width > kRight;  // the legend is right of the plot
    const double left = m.anchor_end ? m.line_x - 4 - width : m.line_x + 4;
    const std::pair<double, double> span{left - kGap / 2, left + width + kGap / 2};
    std::size_t row = 0;
    for (; row < rows.size(); ++row) {
      const bool clear = std::all_of(rows[row].begin(), rows[row].end(), [&](const auto& taken) {
        return span.second <= taken.first || span.first >= taken.second;
      });
      if (clear) break;
    }
    if (row == rows.size()) rows.emplace_back();
    rows[row].push_back(span);
    m.text_x = m.anchor_end ? m.line_x - 4 : m.line_x + 4;
    m.text_y = kTop + 24 + kRowHeight * static_cast<double>(row);
    out.push_back(std::move(m));
  }
  return out;
}

std::string y_tick(double v, bool bytes) {
  if (bytes) return format_bytes(static_cast<std::uint64_t>(std::max(0.0, v)));
  return fmt::format("{:.3g}", v);
}

std::string x_tick(double v) {
  if (std::fabs(v) >= 1e15 || v != std::floor(v)) return fmt::format("{:.3g}", v);
  return format_count(static_cast<std::uint64_t>(std::max(0.0, v)));
}

void axes(std::string& svg, const Scale& s, bool y_bytes, const std::string& x_label, const std::string& y_label) {
  svg += "<g class=\"axis\">";
  for (int i = 0; i <= 5; ++i) {
    const double y = s.y0 + (s.y1 - s.y0) * i / 5;
    svg += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\"/>", num(kLeft), num(kRight), num(s.py(y)),
                       num(s.py(y)));
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>", num(kLeft - 6), num(s.py(y) + 4),
                       escape(y_tick(y, y_bytes)));
  }
  // Whole numbers on a wide integer axis (events, nodes): no "1.43e+03".
  const bool whole = s.x1 - s.x0 >= 6;
  for (int i = 0; i <= 6; ++i) {
    double x = s.x0 + (s.x1 - s.x0) * i / 6;
    if (whole) x = std::round(x);
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>", num(s.px(x)), num(kBottom + 16),
                       escape(x_tick(x)));
  }
  svg += fmt::format("<path d=\"M{} {}V{}H{}\"/>", num(kLeft), num(kTop), num(kBottom), num(kRight));
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>", num((kLeft + kRight) / 2),
                     num(kBottom + 34), escape(x_label));
  svg += fmt::format("<text transform=\"rotate(-90)\" x=\"{}\" y=\"14\" text-anchor=\"middle\">{}</text>",
                     num(-(kTop + kBottom) / 2), escape(y_label));
  svg += "</g>";
}

void legend(std::string& svg, const std::vector<std::string>& names, const char* swatch_class) {
  svg += "<g class=\"legend\">";
  for (std::size_t i = 0; i < names.size(); ++i) {
    const double y = kTop + 6 + 18.0 * static_cast<double>(i);
    svg += fmt::format("<rect class=\"{}{}\" x=\"{}\" y=\"{}\" width=\"12\" height=\"12\"/>", swatch_class,
                       i % kPalette, num(kRight + 16), num(y));
    svg += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>", num(kRight + 34), num(y + 10), escape(names[i]));
  }
  svg += "</g>";
}

std::string points(const Scale& s, const std::vector<double>& x, const std::vector<double>& y) {
  std::string out;
  out.reserve(x.size() * 12);
  for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
    if (i) out += ' ';
    out += num(s.px(x[i]));
    out += ',';
    out += num(s.py(y[i]));
  }
  return out;
}

// The polygon between two lines over the same x (upper forwards, lower back).
std::string band_path(const Scale& s, const std::vector<double>& x, const std::vector<double>& lower,
                      const std::vector<double>& upper) {
  // Appended piece by piece: "L" + num(...) temporaries trip GCC 12's
  // -Wrestrict false positive (GCC bug 105329) once inlined.
  std::string d;
  auto point = [&](char command, double px, double py) {
    d += command;
    d += num(px);
    d += ' ';
    d += num(py);
  };
  for (std::size_t i = 0; i < x.size(); ++i) point(i ? 'L' : 'M', s.px(x[i]), s.py(upper[i]));
  for (std::size_t i = x.size(); i-- > 0;) point('L', s.px(x[i]), s.py(lower[i]));
  d += 'Z';
  return d;
}

bool is_envelope(const Series& s) {
  for (std::size_t i = 0; i < s.low.size() && i < s.high.size(); ++i)
    if (s.low[i] != s.high[i]) return true;
  return false;
}

std::string value_text(double v, bool bytes) {
  return bytes ? fmt::format("{}", static_cast<std::int64_t>(std::llround(v))) : fmt::format("{:.6g}", v);
}

}  // namespace

Series Series::from_envelope(std::string name, const Envelope& envelope, std::int64_t initial) {
  Series s;
  s.name = std::move(name);
  const std::vector<EnvelopeColumn> columns = envelope.filled(initial);
  for (std::size_t i = 0; i < columns.size(); ++i) {
    s.x.push_back(static_cast<double>(envelope.column_begin(i)));
    s.low.push_back(static_cast<double>(columns[i].low));
    s.high.push_back(static_cast<double>(columns[i].high));
  }
  return s;
}

Series Series::constant(std::string name, double value, double x_begin, double x_end) {
  Series s;
  s.name = std::move(name);
  s.x = {x_begin, x_end};
  s.low = s.high = {value, value};
  s.dashed = true;
  return s;
}

void Document::line_chart(const LineChart& chart) {
  // Stacked: each series' band sits on the sum of those before it.
  std::vector<Series> drawn = chart.series;
  if (chart.stacked) {
    if (!drawn.empty()) std::fill(drawn[0].low.begin(), drawn[0].low.end(), 0.0);
    for (std::size_t k = 1; k < drawn.size(); ++k)
      for (std::size_t i = 0; i < drawn[k].high.size() && i < drawn[k - 1].high.size(); ++i) {
        drawn[k].low[i] = drawn[k - 1].high[i];
        drawn[k].high[i] += drawn[k - 1].high[i];
      }
  }
  Scale s{std::numeric_limits<double>::max(), std::numeric_limits<double>::lowest(), 0, 0};
  for (const Series& series : drawn)
    for (std::size_t i = 0; i < series.x.size(); ++i) {
      s.x0 = std::min(s.x0, series.x[i]);
      s.x1 = std::max(s.x1, series.x[i]);
      s.y1 = std::max(s.y1, series.high[i]);
    }
  for (const Band& b : chart.bands) s.x1 = std::max(s.x1, b.x_end);
  if (s.x0 > s.x1) s.x0 = s.x1 = 0;
  s.y1 = s.y1 > 0 ? s.y1 * 1.05 : 1;

  std::string svg = fmt::format(
      "<svg class=\"chart\" viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{}\" data-x0=\"{}\" data-x1=\"{}\" "
      "data-px0=\"{}\" data-px1=\"{}\">",
      kWidth, kHeight, escape(chart.title), s.x0, s.x1, kLeft, kRight);
  svg += "<g class=\"band\">";
  for (const Band& b : chart.bands) {
    if (b.highlight) continue;  // over the series, below
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"><title>{}</title></rect>",
                       num(s.px(b.x_begin)), num(kTop), num(std::max(0.0, s.px(b.x_end) - s.px(b.x_begin))),
                       num(kBottom - kTop), escape(b.label));
    // A label only where it fits; the band's own tooltip names it anyway.
    if (s.px(b.x_end) - s.px(b.x_begin) >= 7.0 * static_cast<double>(b.label.size())) {
      svg +=
          fmt::format("<text x=\"{}\" y=\"{}\">{}</text>", num(s.px(b.x_begin) + 3), num(kTop + 11), escape(b.label));
    }
  }
  svg += "</g>";
  axes(svg, s, chart.y_bytes, chart.x_label, chart.y_label);
  std::vector<std::string> names;
  for (std::size_t k = 0; k < drawn.size(); ++k) {
    const Series& series = drawn[k];
    names.push_back(series.name);
    const std::string cls = fmt::format("s{}", k % kPalette);
    svg += fmt::format("<g class=\"series\" data-series=\"{}\">", escape(series.name));
    if (chart.stacked) {
      svg += fmt::format("<path class=\"area {}\" d=\"{}\"><title>{}</title></path>", cls,
                         band_path(s, series.x, series.low, series.high), escape(series.name));
    } else {
      if (is_envelope(series)) {
        svg +=
            fmt::format("<path class=\"envelope {}\" d=\"{}\"/>", cls, band_path(s, series.x, series.low, series.high));
      }
      svg += fmt::format("<polyline class=\"line {}{}\" points=\"{}\" fill=\"none\"><title>{}</title></polyline>", cls,
                         series.dashed ? " dashed" : "", points(s, series.x, series.high), escape(series.name));
    }
    svg += "</g>";
  }
  // Highlighted bands lie over the series, translucent, so they show on a
  // stacked chart too.
  for (const Band& b : chart.bands) {
    if (!b.highlight) continue;
    svg +=
        fmt::format("<rect class=\"highlight\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"><title>{}</title></rect>",
                    num(s.px(b.x_begin)), num(kTop), num(std::max(0.5, s.px(b.x_end) - s.px(b.x_begin))),
                    num(kBottom - kTop), escape(b.label));
  }
  for (const MarkerLabel& m : marker_labels(chart.markers, s)) {
    svg += fmt::format(
        "<g class=\"marker\"><line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\"/><text x=\"{3}\" y=\"{4}\"{6}>{5}"
        "</text><title>{5}</title></g>",
        num(m.line_x), num(kTop), num(kBottom), num(m.text_x), num(m.text_y), escape(m.label),
        m.anchor_end ? " text-anchor=\"end\"" : "");
  }
  legend(svg, names, "s");
  svg += "</svg>";

  // The numbers: one row per x of the first series (all series of a chart
  // share their x, but constants, which are written once).
  std::string table = "<table><thead><tr><th class=\"n\">" + escape(chart.x_label) + "</th>";
  for (const Series& series : chart.series) table += "<th class=\"n\">" + escape(series.name) + "</th>";
  table += "</tr></thead><tbody>";
  const Series* longest = nullptr;
  for (const Series& series : chart.series)
    if (!longest || series.x.size() > longest->x.size()) longest = &series;
  if (longest) {
    for (std::size_t i = 0; i < longest->x.size(); ++i) {
      table += fmt::format("<tr data-x=\"{}\"><td class=\"n\">{}</td>", longest->x[i], x_tick(longest->x[i]));
      for (const Series& series : chart.series) {
        const std::size_t j = series.x.size() == longest->x.size() ? i : std::min(i, series.x.size() - 1);
        std::string cell;
        if (j < series.low.size()) {
          cell = series.low[j] == series.high[j]
                     ? value_text(series.high[j], chart.y_bytes)
                     : value_text(series.low[j], chart.y_bytes) + " to " + value_text(series.high[j], chart.y_bytes);
        }
        table += "<td class=\"n\">" + cell + "</td>";
      }
      table += "</tr>";
    }
  }
  table += "</tbody></table>";

  body_ += fmt::format("<figure class=\"line-chart\" id=\"{}\"><h3>{}</h3>{}<div class=\"readout\"></div>",
                       escape(chart.id), escape(chart.title), svg);
  body_ += fmt::format("<details><summary>The numbers ({} rows{})</summary>{}</details></figure>\n",
                       longest ? longest->x.size() : 0, chart.y_bytes ? ", bytes" : "", table);
}

void Document::rect_chart(const RectChart& chart) {
  const Scale s{0, chart.x_max > 0 ? chart.x_max : 1, 0, chart.y_max > 0 ? chart.y_max : 1};
  std::string svg = fmt::format("<svg class=\"chart\" viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{}\">", kWidth,
                                kHeight, escape(chart.title));
  axes(svg, s, true, chart.x_label, chart.y_label);
  svg += "<g class=\"buffers\">";
  for (const Rect& r : chart.rects) {
    const double x = s.px(r.x_begin), y = s.py(r.y_end);
    const double w = std::max(0.5, s.px(r.x_end) - x), h = std::max(0.5, s.py(r.y_begin) - y);
    svg +=
        fmt::format("<rect class=\"buffer c{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"><title>{}</title></rect>",
                    r.color % 10, num(x), num(y), num(w), num(h), escape(r.tip));
  }
  svg += "</g></svg>";
  body_ +=
      fmt::format("<figure class=\"rect-chart\" id=\"{}\"><h3>{}</h3>{}", escape(chart.id), escape(chart.title), svg);
  if (!chart.note.empty()) body_ += "<p class=\"note\">" + escape(chart.note) + "</p>";
  if (!chart.table_header.empty()) {
    std::string table = "<table><thead><tr>";
    for (std::size_t i = 0; i < chart.table_header.size(); ++i)
      table += (i ? "<th class=\"n\">" : "<th>") + escape(chart.table_header[i]) + "</th>";
    table += "</tr></thead><tbody>";
    for (const auto& row : chart.table_rows) {
      table += "<tr>";
      for (std::size_t i = 0; i < row.size(); ++i)
        table += (i ? "<td class=\"n\">" : "<td>") + escape(row[i]) + "</td>";
      table += "</tr>";
    }
    table += "</tbody></table>";
    body_ +=
        fmt::format("<details><summary>The numbers ({} rows)</summary>{}</details>", chart.table_rows.size(), table);
  }
  body_ += "</figure>\n";
}

}  // namespace gpumem::report::html
