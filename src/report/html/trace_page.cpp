// The trace page: allocated bytes over time against each policy's
// reserved bytes and the optimal arena, what stayed, the iterations.
#include <algorithm>

#include <fmt/format.h>

#include "gpumem/common/units.h"
#include "gpumem/report/html/charts.h"
#include "gpumem/report/html/document.h"
#include "gpumem/report/html/trace_page.h"
#include "gpumem/trace/lifetimes.h"
#include "report/html/arena_picture.h"

namespace gpumem::report {
namespace {

using html::Document;

std::string bytes(std::int64_t b) { return format_bytes(static_cast<std::uint64_t>(std::max<std::int64_t>(0, b))); }

html::Table context_table(const std::string& caption, const std::vector<trace::ContextBytes>& rows) {
  html::Table t;
  t.caption = caption;
  t.header = {"where (tag and the user's frame)", "allocations", "bytes"};
  for (const trace::ContextBytes& c : rows) t.rows.push_back({c.label, format_count(c.count), bytes(c.bytes)});
  return t;
}

}  // namespace

std::string trace_html(const trace::Trace& trace, const trace::TraceStats* stats, const trace::ReplayReport* replay,
                       const trace::Lifetimes* given) {
  Document doc("Memory trace " + trace.source);
  const std::int32_t device = replay ? replay->device : stats ? stats->device : trace::busiest_device(trace);
  const trace::Lifetimes extracted =
      given && given->device == device ? trace::Lifetimes{} : trace::extract_lifetimes(trace, device, /*strict=*/false);
  const trace::Lifetimes& lifetimes = given && given->device == device ? *given : extracted;
  std::vector<std::pair<std::string, std::string>> facts = {
      {"trace", trace.source},
      {"format", trace.format},
      {"events", format_count(trace.events.size())},
      {"device", std::to_string(device)},
      {"allocations", format_count(lifetimes.allocations.size())}};
  if (stats) {
    facts.push_back({"peak allocated",
                     fmt::format("{} at event {}", bytes(stats->peak_allocated), format_count(stats->peak_event))});
    facts.push_back({"never freed", fmt::format("{} allocations, {}", format_count(stats->never_freed),
                                                bytes(stats->never_freed_bytes))});
  }
  if (replay && replay->optimal_arena > 0) {
    facts.push_back({"optimal arena", fmt::format("{}{}", bytes(replay->optimal_arena),
                                                  replay->optimal_proven ? " (proven)" : " (best found)")});
  }
  doc.facts(facts);

  doc.heading("Memory over the trace");
  html::LineChart chart;
  chart.id = "timeline";
  chart.title = replay ? "The trace's allocated bytes, each policy's reserved bytes and the optimal arena"
                       : "The trace's allocated bytes";
  chart.x_label = "event";
  chart.y_label = "bytes";
  const Envelope allocated = replay && replay->allocated_timeline.x_end() > 1
                                 ? replay->allocated_timeline
                                 : trace::allocated_over_time(lifetimes, trace.events.size(), html::kHtmlColumns);
  chart.series.push_back(html::Series::from_envelope("allocated", allocated));
  if (replay) {
    for (const trace::PolicyResult& p : replay->policies) {
      chart.series.push_back(html::Series::from_envelope(p.name + " reserved", p.reserved_timeline));
      if (p.oom_at_event) {
        chart.markers.push_back({static_cast<double>(*p.oom_at_event), p.name + " runs out of memory"});
      }
    }
    if (replay->optimal_arena > 0) {
      chart.series.push_back(html::Series::constant("optimal arena", static_cast<double>(replay->optimal_arena), 0,
                                                    static_cast<double>(trace.events.size())));
    }
  }
  if (stats && stats->traced_peak > 0) {
    chart.markers.push_back({static_cast<double>(stats->traced_peak_event), "peak: " + bytes(stats->traced_peak)});
  } else if (replay && replay->traced_peak > 0) {
    chart.markers.push_back({static_cast<double>(replay->traced_peak_event), "peak: " + bytes(replay->traced_peak)});
  }
  doc.line_chart(chart);
  if (trace.events.size() > html::kHtmlColumns) {
    doc.paragraph(
        fmt::format("Each of the {} columns spans {} events and shows the lowest and highest value in it "
                    "(the shaded band) and the highest as the line.",
                    format_count(html::kHtmlColumns),
                    format_count((trace.events.size() + html::kHtmlColumns - 1) / html::kHtmlColumns)));
  }

  if (replay) {
    doc.heading("Allocator policies");
    html::Table t;
    t.header = {"policy",       "peak reserved",   "allocated then", "fragmentation at the peak",
                "device calls", "ran out at event"};
    for (const trace::PolicyResult& p : replay->policies) {
      t.rows.push_back({p.name, bytes(p.peak_reserved), bytes(p.allocated_at_peak),
                        fmt::format("{:.1f}%", 100 * p.fragmentation_at_peak), format_count(p.upstream_calls),
                        p.oom_at_event ? format_count(*p.oom_at_event) : "-"});
    }
    doc.table(t);
  }

  if (stats) {
    doc.heading("What is live at the peak");
    doc.table(context_table("Bytes live at the peak, by where they were allocated", stats->live_at_peak));
    doc.heading("What was never freed");
    doc.table(context_table("Allocations the trace never frees, by where they were allocated",
                            stats->never_freed_by_context));
    const trace::IterationReport& it = stats->iterations;
    doc.heading("Iterations");
    if (!it.repeats) {
      doc.paragraph("The allocations do not repeat: no iterations found.");
    } else {
      doc.facts({{"iterations", format_count(it.iterations)},
                 {"allocations per iteration", format_count(it.period)},
                 {"shape", it.shape},
                 {"growth per iteration", bytes(it.growth_per_iteration)}});
      html::LineChart left;
      left.id = "iterations";
      left.title = "Bytes live at each iteration's lowest point (a leak grows here)";
      left.x_label = "iteration";
      left.y_label = "bytes";
      html::Series s;
      s.name = "live at the trough";
      for (std::size_t i = 0; i < it.live_at_trough.size(); ++i) {
        s.x.push_back(static_cast<double>(i));
        s.low.push_back(static_cast<double>(it.live_at_trough[i]));
        s.high.push_back(static_cast<double>(it.live_at_trough[i]));
      }
      left.series.push_back(std::move(s));
      doc.line_chart(left);
    }
  }

  if (replay && !replay->optimal_offsets.empty()) {
    doc.heading("The optimal arena");
    const plan::Problem problem = trace::to_problem(lifetimes, trace.events.size());
    const auto describe = [&](std::size_t i) {
      const trace::Allocation& a = lifetimes.allocations[i];
      const std::string where = trace::context_label(trace, a.context);
      return fmt::format("allocation {} ({})", i, where);
    };
    doc.rect_chart(html::arena_chart("arena", "Every allocation at the planner's offset: event (x) by offset (y)",
                                     "event", problem, replay->optimal_offsets, describe, html::kHtmlMaxRects));
  }
  return doc.html();
}

}  // namespace gpumem::report
