// `gpumem inspect`'s report: the text a person reads and the JSON document
// (docs/inspect.md has its schema), from one InspectResult.
#include "gpumem/report/inspect_report.h"
#include "gpumem/common/flag_names.h"

#include <algorithm>

#include <fmt/format.h>

#include "gpumem/common/units.h"
#include "report/largest.h"

namespace gpumem {
namespace {

std::string node_label(const Graph& g, int index) {
  const Node& n = g.nodes[static_cast<size_t>(index)];
  return fmt::format("node #{} '{}' ({})", index, n.name, n.op_type);
}

// Lists at most `limit` names, then how many more.
std::string name_list(const std::vector<std::string>& names, size_t limit = 8) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < limit; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > limit) s += fmt::format(" and {} more", names.size() - limit);
  return s;
}

}  // namespace

std::string render_inspect_text(const InspectResult& r, const ReportOptions& options) {
  const Graph& g = r.model.graph;
  const MemoryAnalysis& m = r.memory;
  std::string out;
  auto line = [&out](const std::string& s = {}) { out += s + "\n"; };

  line(fmt::format("Model       {}", r.model.path));
  line(fmt::format("            {}, IR {}, opset {}, {} nodes",
                   r.model.producer.empty() ? "unknown producer" : r.model.producer, r.model.ir_version, r.model.opset,
                   format_count(g.nodes.size())));
  line();
  if (options.need) {
    const auto& need = *options.need;
    line(fmt::format("Inference   needs at least {} at these input shapes{}", format_bytes(need.at_least()),
                     need.sizes_unknown ? " (some sizes unknown, see below)" : ""));
    line(need.sizes_unknown && need.activation_bytes == 0
             ? fmt::format("            {} of resident weights + activations of unknown size",
                           format_bytes(need.weight_bytes))
             : fmt::format("            {} of resident weights + {} of activations{}", format_bytes(need.weight_bytes),
                           format_bytes(need.activation_bytes),
                           need.sizes_unknown ? " (the largest known one)" : " at their peak, in-place reuse allowed"));
    line(need.overhead_bytes
             ? fmt::format("            + {} of runtime overhead (" GPUMEM_FLAG_OVERHEAD ")",
                           format_bytes(need.overhead_bytes))
             : "            + the runtime's own memory (CUDA context, workspaces): add it with " GPUMEM_FLAG_OVERHEAD);
    line();
  }
  const auto& w = m.weights;
  line(fmt::format("Weights     {:>12}  resident at run time, in {} tensors, {} elements",
                   format_bytes(w.resident.bytes), format_count(w.resident.tensors),
                   format_count(w.resident.elements)));
  const uint64_t stored = w.bytes - w.derived.bytes;
  line(fmt::format("  stored    {:>12}  in the file", format_bytes(stored)));
  if (w.derived.tensors > 0) {
    std::vector<std::string> ops;
    for (const auto& [op, t] : w.derived_by_op) ops.push_back(fmt::format("{} {}", op, format_bytes(t.bytes)));
    line(fmt::format("  derived   {:>12}  in {} tensors computed from other weights: {}", format_bytes(w.derived.bytes),
                     format_count(w.derived.tensors), name_list(ops, 4)));
  }
  if (w.bytes > w.resident.bytes) {
    line(fmt::format("  folded    {:>12}  not kept at run time: sources of folded nodes, Identity aliases",
                     format_bytes(w.bytes - w.resident.bytes)));
  }
  line(fmt::format("  all       {:>12}  in {} tensors, {} elements, before folding", format_bytes(w.bytes),
                   format_count(w.count), format_count(w.elements)));
  for (const auto& [dtype, t] : w.by_dtype) {
    line(fmt::format("  {:<10}{:>12}  in {} tensors, {} elements", dtype_name(dtype), format_bytes(t.bytes),
                     format_count(t.tensors), format_count(t.elements)));
  }
  line();
  const size_t activation_count = m.activations.size() + m.unknown_activations.size();
  line(fmt::format("Activations {:>12}  in {} tensors, if none were reused", format_bytes(m.total_activation_bytes),
                   format_count(activation_count)));
  if (m.peak_node >= 0) {
    line(fmt::format("  peak live {:>12}  at {}", format_bytes(m.peak_live_bytes), node_label(g, m.peak_node)));
    if (m.peak_live_bytes > 0) {
      line(fmt::format("  reuse lets {:.1f}x less memory serve the same activations",
                       static_cast<double>(m.total_activation_bytes) / static_cast<double>(m.peak_live_bytes)));
    }
  }
  line();
  const auto largest = detail::largest_activations(m, options.top);
  if (!largest.empty()) {
    line(fmt::format("Largest activations (live from node to node)"));
    line(fmt::format("  {:>12}  {:<8} {:<20} {:>11}  {}", "size", "dtype", "shape", "live", "name"));
    for (const Activation* a : largest) {
      const Tensor& t = g.tensors[static_cast<size_t>(a->tensor)];
      line(fmt::format("  {:>12}  {:<8} {:<20} {:>11}  {}", format_bytes(a->bytes),
                       dtype_name(priced_dtype(t, m.pricing.activations_as)), t.shape_string(),
                       fmt::format("{}-{}", a->first, a->last), t.name));
    }
    line();
  }
  for (const auto& c : m.subgraph_charges) {
    line(fmt::format("Subgraphs   {:>12}  charged at {}: the largest of its {} subgraph(s){}", format_bytes(c.bytes),
                     node_label(g, c.node), c.subgraphs, c.has_unknown ? ", some sizes unknown" : ""));
  }
  if (!m.subgraph_charges.empty()) line();
  if (!options.levers.empty() && options.need) {
    line("Levers      what one inference needs under another setting (the model analysed again)");
    for (const auto& lever : options.levers) {
      const auto now = options.need->at_least(), then = lever.need.at_least();
      line(fmt::format("  {:<22}{:>12}  {} {}: {}", lever.setting, format_bytes(then),
                       format_bytes(now > then ? now - then : then - now), now > then ? "less" : "more", lever.effect));
    }
    line();
  }
  if (m.lower_bound()) {
    line("Unknown sizes: the totals above are lower bounds.");
    std::vector<std::string> names;
    for (int id : m.unknown_activations) {
      const Tensor& t = g.tensors[static_cast<size_t>(id)];
      names.push_back(fmt::format("{} {}", t.name, t.shape_string()));
    }
    if (!names.empty()) line(fmt::format("  {} activation(s): {}", names.size(), name_list(names)));
    if (!m.weights.unknown.empty()) {
      line(fmt::format("  {} weight(s): {}", m.weights.unknown.size(), name_list(m.weights.unknown)));
    }
    const auto& notes = r.model.notes;
    if (!notes.unbound_dims.empty()) {
      line(fmt::format("  symbolic dimensions not bound (use " GPUMEM_FLAG_DIM " NAME=VALUE or " GPUMEM_FLAG_BATCH
                       " N): {}",
                       name_list(notes.unbound_dims)));
    }
    if (!notes.unknown_ops.empty()) line(fmt::format("  ops without a schema: {}", name_list(notes.unknown_ops)));
    if (!notes.failed_nodes.empty()) {
      line(fmt::format("  shape inference failed at: {}", name_list(notes.failed_nodes, 3)));
    }
  }
  return out;
}

nlohmann::ordered_json inspect_to_json(const InspectResult& r, const ReportOptions& options) {
  using json = nlohmann::ordered_json;
  const Graph& g = r.model.graph;
  const MemoryAnalysis& m = r.memory;
  auto node_json_name = [&](int i) { return i >= 0 ? g.nodes[static_cast<size_t>(i)].name : std::string(); };

  json doc;
  doc["schema_version"] = kInspectSchemaVersion;
  doc["model"] = r.model.path;
  doc["producer"] = r.model.producer;
  doc["ir_version"] = r.model.ir_version;
  doc["opset"] = r.model.opset;
  doc["nodes"] = g.nodes.size();

  if (options.need) {
    const auto& need = *options.need;
    doc["inference_bytes"] = need.at_least();
    doc["inference"] = {{"weights_resident_bytes", need.weight_bytes},
                        {"activation_bytes", need.activation_bytes},
                        {"activation_arena_bytes", need.activation_arena_bytes},
                        {"overhead_bytes", need.overhead_bytes},
                        {"lower_bound", need.sizes_unknown}};
  } else {
    doc["inference_bytes"] = nullptr;
    doc["inference"] = nullptr;
  }
  json levers = json::array();
  for (const auto& lever : options.levers) {
    levers.push_back(
        {{"setting", lever.setting}, {"effect", lever.effect}, {"inference_bytes", lever.need.at_least()}});
  }
  doc["levers"] = levers;

  json by_dtype = json::array();
  for (const auto& [dtype, totals] : m.weights.by_dtype) {
    by_dtype.push_back({{"dtype", dtype_name(dtype)},
                        {"count", totals.tensors},
                        {"elements", totals.elements},
                        {"bytes", totals.bytes}});
  }
  json derived_by_op = json::array();
  for (const auto& [op, totals] : m.weights.derived_by_op) {
    derived_by_op.push_back(
        {{"op_type", op}, {"count", totals.tensors}, {"elements", totals.elements}, {"bytes", totals.bytes}});
  }
  doc["weights"] = {{"count", m.weights.count},
                    {"elements", m.weights.elements},
                    {"bytes", m.weights.bytes},
                    {"resident_count", m.weights.resident.tensors},
                    {"resident_bytes", m.weights.resident.bytes},
                    {"stored_bytes", m.weights.bytes - m.weights.derived.bytes},
                    {"by_dtype", by_dtype},
                    {"derived",
                     {{"count", m.weights.derived.tensors},
                      {"elements", m.weights.derived.elements},
                      {"bytes", m.weights.derived.bytes},
                      {"by_op", derived_by_op}}},
                    {"unknown", m.weights.unknown}};

  json unknown = json::array();
  for (int id : m.unknown_activations) {
    const Tensor& t = g.tensors[static_cast<size_t>(id)];
    unknown.push_back({{"name", t.name},
                       {"dtype", dtype_name(priced_dtype(t, m.pricing.activations_as))},
                       {"shape", t.shape_string()}});
  }
  json largest = json::array();
  for (const Activation* a : detail::largest_activations(m, options.top)) {
    const Tensor& t = g.tensors[static_cast<size_t>(a->tensor)];
    largest.push_back({{"name", t.name},
                       {"dtype", dtype_name(priced_dtype(t, m.pricing.activations_as))},
                       {"shape", t.shape_string()},
                       {"bytes", a->bytes},
                       {"first_node", a->first},
                       {"last_node", a->last}});
  }
  doc["activations"] = {
      {"tensors", m.activations.size() + m.unknown_activations.size()},
      {"total_bytes", m.total_activation_bytes},
      {"peak_live_bytes", m.peak_live_bytes},
      {"peak_node", m.peak_node >= 0 ? json(m.peak_node) : json(nullptr)},
      {"peak_node_name", node_json_name(m.peak_node)},
      {"peak_node_op_type", m.peak_node >= 0 ? g.nodes[static_cast<size_t>(m.peak_node)].op_type : ""},
      {"reuse_ratio", m.peak_live_bytes
                          ? static_cast<double>(m.total_activation_bytes) / static_cast<double>(m.peak_live_bytes)
                          : 0.0},
      {"unknown_shape_tensors", m.unknown_activations.size()},
      {"unknown", unknown},
      {"largest", largest}};
  doc["lower_bound"] = m.lower_bound();
  doc["shape_inference"] = {{"folded_nodes", r.model.notes.folded_nodes},
                            {"unknown_ops", r.model.notes.unknown_ops},
                            {"failed_nodes", r.model.notes.failed_nodes},
                            {"unbound_dims", r.model.notes.unbound_dims}};
  json subgraphs = json::array();
  for (const auto& c : m.subgraph_charges) {
    const Node& node = g.nodes[static_cast<size_t>(c.node)];
    subgraphs.push_back({{"node", c.node},
                         {"name", node.name},
                         {"op_type", node.op_type},
                         {"subgraphs", c.subgraphs},
                         {"charged_bytes", c.bytes},
                         {"has_unknown", c.has_unknown}});
  }
  doc["subgraphs"] = subgraphs;
  json timeline = json::array();
  for (const auto& p : m.timeline) {
    const Node& node = g.nodes[static_cast<size_t>(p.node)];
    timeline.push_back(
        {{"index", p.node}, {"name", node.name}, {"op_type", node.op_type}, {"live_bytes", p.live_bytes}});
  }
  doc["timeline"] = timeline;
  return doc;
}

}  // namespace gpumem
