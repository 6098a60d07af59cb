// The training page: one step's live bytes stacked by what they are.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "gpumem/common/units.h"
#include "gpumem/report/html/charts.h"
#include "gpumem/report/html/document.h"
#include "gpumem/report/html/train_page.h"
#include "report/html/summary_section.h"

namespace gpumem::report {

std::string train_html(const train::TrainingStep& step, const Summary& summary) {
  html::Document doc("Training step of " + step.model);
  html::summary_section(doc, summary);
  doc.facts(
      {{"model", step.model},
       {"source", step.traced ? "traced: " + step.traced->with + " (" + step.traced->optimizer + ", " +
                                    step.traced->precision + ", device " + train::to_string(step.options.device) + ")"
                              : std::string("predicted from the graph")},
       {"peak",
        fmt::format("{} in {} at {}", format_bytes(step.peak_bytes), train::to_string(step.peak_phase), step.peak_op)},
       {"weights + gradients + optimizer states", format_bytes(step.static_estimate_bytes)},
       {"steady state between steps", format_bytes(step.steady_state_bytes)},
       {"recomputed ops (checkpointing)", format_count(step.recomputed_ops.size())}});

  // Live bytes per time and category, from each allocation's lifetime.
  const int times = std::max(step.end_time, 1);
  std::vector<std::vector<std::int64_t>> delta(train::kCategories,
                                               std::vector<std::int64_t>(static_cast<std::size_t>(times) + 1, 0));
  for (const train::Allocation& a : step.allocations) {
    auto& d = delta[static_cast<std::size_t>(a.category)];
    d[static_cast<std::size_t>(std::clamp(a.alloc_time, 0, times))] += static_cast<std::int64_t>(a.bytes);
    d[static_cast<std::size_t>(std::clamp(a.free_time, 0, times))] -= static_cast<std::int64_t>(a.bytes);
  }
  html::LineChart chart;
  chart.id = "step";
  chart.title = "Live bytes over one step, stacked by what they are";
  chart.x_label = "step time (op)";
  chart.y_label = "bytes";
  chart.stacked = true;
  const std::size_t columns = std::min<std::size_t>(static_cast<std::size_t>(times), html::kHtmlColumns);
  for (int c = 0; c < train::kCategories; ++c) {
    // Stacked areas share their x: one point per column, the column's
    // highest live total for this category.
    Envelope e(0, times, columns);
    std::int64_t live = 0;
    for (int t = 0; t < times; ++t) {
      live += delta[static_cast<std::size_t>(c)][static_cast<std::size_t>(t)];
      e.add(t, live);
    }
    html::Series s = html::Series::from_envelope(train::to_string(static_cast<train::Category>(c)), e);
    s.low = s.high;
    chart.series.push_back(std::move(s));
  }
  // Phases as bands.
  for (std::size_t i = 0; i < step.timeline.size();) {
    std::size_t j = i;
    while (j < step.timeline.size() && step.timeline[j].phase == step.timeline[i].phase) ++j;
    chart.bands.push_back({static_cast<double>(step.timeline[i].time),
                           static_cast<double>(j < step.timeline.size() ? step.timeline[j].time : times),
                           train::to_string(step.timeline[i].phase)});
    i = j;
  }
  // Checkpointing: where backward runs forward ops again.
  for (std::size_t i = 0; i < step.timeline.size();) {
    if (step.timeline[i].op.rfind("recompute ", 0) != 0) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < step.timeline.size() && step.timeline[j].op.rfind("recompute ", 0) == 0) ++j;
    chart.bands.push_back({static_cast<double>(step.timeline[i].time),
                           static_cast<double>(j < step.timeline.size() ? step.timeline[j].time : times),
                           "recompute (checkpointing)", /*highlight=*/true});
    i = j;
  }
  chart.markers.push_back({static_cast<double>(step.peak_time), "peak: " + format_bytes(step.peak_bytes)});
  doc.line_chart(chart);

  if (!step.recomputed_ops.empty()) {
    doc.heading("Checkpointing");
    const std::set<int> recomputed(step.recomputed_ops.begin(), step.recomputed_ops.end());
    html::Table r;
    r.header = {"recomputed in backward", "kind"};
    for (int op : step.recomputed_ops) {
      const auto i = static_cast<std::size_t>(op);
      r.rows.push_back({i < step.op_names.size() ? step.op_names[i] : std::to_string(op),
                        i < step.op_kinds.size() ? step.op_kinds[i] : ""});
    }
    doc.table(r);
  }
  return doc.html();
}

}  // namespace gpumem::report
