// The model and plan pages.
#include <algorithm>
#include <functional>

#include <fmt/format.h>

#include "gpumem/common/units.h"
#include "gpumem/report/html/charts.h"
#include "gpumem/report/html/document.h"
#include "gpumem/report/html/model_page.h"
#include "report/html/arena_picture.h"
#include "report/html/summary_section.h"

namespace gpumem::report {
namespace {

using html::Document;

std::string bytes(std::uint64_t b) { return format_bytes(b); }

void add_plan(Document& doc, const infer::PlanReport& plan) {
  const plan::SolveResult& r = plan.result;
  doc.heading("The arena");
  std::vector<std::pair<std::string, std::string>> facts = {
      {"arena", fmt::format("{} ({} bytes)", bytes(static_cast<std::uint64_t>(r.plan.arena)), r.plan.arena)},
      {"lower bound",
       fmt::format("{} (the most bytes live at once)", bytes(static_cast<std::uint64_t>(r.lower_bound)))},
      {"optimal",
       r.optimal
           ? "proven"
           : fmt::format("not proven: at most {} above the optimum", bytes(static_cast<std::uint64_t>(r.gap_bytes)))},
      {"buffers", format_count(plan.problem.buffers.size())},
      {"solver", fmt::format("{} in {:.2f} s", r.solver, r.seconds)}};
  if (plan.from_model) {
    facts.push_back({"every activation its own memory", bytes(plan.naive_bytes)});
    facts.push_back({"in place", fmt::format("{} tensors reuse an input's storage, {} saved", plan.in_place_tensors,
                                             bytes(static_cast<std::uint64_t>(plan.in_place_saved_bytes())))});
  }
  doc.facts(facts);
  const auto describe = [&](std::size_t i) {
    return i < plan.buffer_details.size() ? plan.buffer_details[i] : plan.problem.buffers[i].id;
  };
  // Models: buffers that tensors share in place stand out (orange).
  const std::function<int(std::size_t)> in_place = [&](std::size_t i) {
    return i < plan.buffer_details.size() && plan.buffer_details[i].find("; then in place: ") != std::string::npos ? 1
                                                                                                                   : 0;
  };
  html::RectChart arena =
      html::arena_chart("arena", "Buffers in the arena: time (x) by offset (y); hover for each",
                        plan.from_model ? "node index" : "time", plan.problem, r.plan.offsets, describe,
                        html::kHtmlMaxRects, plan.from_model ? in_place : std::function<int(std::size_t)>());
  if (plan.from_model) {
    arena.note += std::string(arena.note.empty() ? "" : " ") +
                  "Blue: a buffer one tensor uses; orange: a buffer two or more tensors share in place.";
  }
  doc.rect_chart(arena);
}

}  // namespace

std::string model_html(const InspectResult& inspected, const infer::PlanReport* plan) {
  const Graph& g = inspected.model.graph;
  const MemoryAnalysis& m = inspected.memory;
  Document doc("Memory of " + inspected.model.path);
  std::string peak_at = "no nodes";
  if (m.peak_node >= 0 && static_cast<std::size_t>(m.peak_node) < g.nodes.size()) {
    const Node& n = g.nodes[static_cast<std::size_t>(m.peak_node)];
    peak_at = fmt::format("node {} ({}, {})", m.peak_node, n.name, n.op_type);
  }
  doc.facts({{"model", inspected.model.path},
             {"nodes", format_count(g.nodes.size())},
             {"resident weights", bytes(m.weights.resident.bytes)},
             {"peak live activations", fmt::format("{} at {}", bytes(m.peak_live_bytes), peak_at)},
             {"all activations, no reuse", bytes(m.total_activation_bytes)}});

  doc.heading("Live activations over the node order");
  html::LineChart live;
  live.id = "live";
  live.title = "Bytes of activations live at each node";
  live.x_label = "node index";
  live.y_label = "live bytes";
  if (m.timeline.size() <= html::kHtmlColumns) {
    html::Series s;
    s.name = "live activations";
    for (const TimelinePoint& p : m.timeline) {
      s.x.push_back(p.node);
      s.low.push_back(static_cast<double>(p.live_bytes));
      s.high.push_back(static_cast<double>(p.live_bytes));
    }
    live.series.push_back(std::move(s));
  } else {
    Envelope e(0, static_cast<std::int64_t>(m.timeline.size()), html::kHtmlColumns);
    for (const TimelinePoint& p : m.timeline) e.add(p.node, static_cast<std::int64_t>(p.live_bytes));
    live.series.push_back(html::Series::from_envelope("live activations", e));
  }
  if (m.peak_node >= 0) live.markers.push_back({static_cast<double>(m.peak_node), "peak: " + bytes(m.peak_live_bytes)});
  doc.line_chart(live);

  doc.heading("The largest activations");
  std::vector<const Activation*> largest;
  for (const Activation& a : m.activations) largest.push_back(&a);
  const std::size_t top = std::min<std::size_t>(15, largest.size());
  std::partial_sort(largest.begin(), largest.begin() + static_cast<std::ptrdiff_t>(top), largest.end(),
                    [](const Activation* a, const Activation* b) { return a->bytes > b->bytes; });
  html::Table t;
  t.header = {"tensor", "shape", "dtype", "bytes", "live from node", "to node", "made by"};
  for (std::size_t i = 0; i < top; ++i) {
    const Activation& a = *largest[i];
    const Tensor& tensor = g.tensors[static_cast<std::size_t>(a.tensor)];
    const std::string made_by =
        tensor.producer >= 0 ? g.nodes[static_cast<std::size_t>(tensor.producer)].op_type : "graph input";
    t.rows.push_back({tensor.name, tensor.shape_string(), std::string(dtype_name(tensor.dtype)), bytes(a.bytes),
                      std::to_string(a.first), std::to_string(a.last), made_by});
  }
  doc.table(t);
  if (plan) add_plan(doc, *plan);
  return doc.html();
}

std::string plan_html(const infer::PlanReport& plan) {
  Document doc("Plan of " + plan.input);
  // The verdict the text gives, in its words (report/summary.h).
  Summary verdict;
  verdict.verdict = plan.verdict;
  summary_section(doc, verdict);
  add_plan(doc, plan);
  return doc.html();
}

}  // namespace gpumem::report
