#include <algorithm>

#include "gpumem/report/inspect_report.h"
#include "report/largest.h"

namespace gpumem {

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
