#include <algorithm>

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/common/units.h"
#include "gpumem/report/weights_report.h"
#include "report/shape_text.h"

namespace gpumem {
namespace {

using report::shape_text;

}  // namespace

std::string render_weights_text(const weights::WeightSummary& s, int top) {
  std::string out;
  auto line = [&out](const std::string& l = {}) { out += l + "\n"; };
  line(fmt::format("Weights     {} ({}, {})", one_line(s.file.path), s.file.format, format_bytes(s.file.file_bytes)));
  line(fmt::format("            {} tensors, {} values", format_count(s.file.tensors.size()), format_count(s.elements)));
  line();
  line(fmt::format("Total       {:>12}  tensor data", format_bytes(s.total_bytes)));
  if (s.duplicates_checked) {
    line(fmt::format("Unique      {:>12}  {} tensor(s) stored twice or more, counted once",
                     format_bytes(s.unique_bytes), s.duplicates.size()));
  }
  for (const auto& d : s.by_dtype) {
    line(fmt::format("  {:<10}{:>12}  in {} tensors, {} values", one_line(d.key), format_bytes(d.bytes),
                     format_count(d.tensors), format_count(d.elements)));
  }
  size_t layers = 0;
  uint64_t layer_bytes = 0, largest = 0;
  for (const auto& l : s.by_layer) {
    if (l.key.empty()) continue;
    ++layers;
    layer_bytes += l.bytes;
    largest = std::max(largest, l.bytes);
  }
  if (layers > 0) {
    line(fmt::format("Layers      {:>12}  in {} layers, the largest {}; {} outside them", format_bytes(layer_bytes),
                     layers, format_bytes(largest), format_bytes(s.total_bytes - layer_bytes)));
  }
  for (const auto& d : s.duplicates) {
    std::string names;
    for (const auto& n : d.names) names += (names.empty() ? "" : " = ") + one_line(n);
    line(fmt::format("Duplicate   {:>12}  {}", format_bytes(d.bytes), names));
  }
  std::vector<const weights::TensorEntry*> largest_tensors;
  for (const auto& t : s.file.tensors) largest_tensors.push_back(&t);
  std::stable_sort(largest_tensors.begin(), largest_tensors.end(),
                   [](const auto* a, const auto* b) { return a->bytes > b->bytes; });
  if (largest_tensors.size() > static_cast<size_t>(std::max(top, 0)))
    largest_tensors.resize(static_cast<size_t>(std::max(top, 0)));
  if (!largest_tensors.empty()) {
    line();
    line("Largest tensors");
    for (const auto* t : largest_tensors) {
      line(fmt::format("  {:>12}  {:<7} {:<20} {}", format_bytes(t->bytes), one_line(t->dtype), shape_text(t->shape),
                       one_line(t->name)));
    }
  }
  return out;
}

nlohmann::ordered_json weights_to_json(const weights::WeightSummary& s) {
  using json = nlohmann::ordered_json;
  json doc;
  doc["schema_version"] = kWeightsSchemaVersion;
  doc["path"] = s.file.path;
  doc["format"] = s.file.format;
  doc["file_bytes"] = s.file.file_bytes;
  doc["total_bytes"] = s.total_bytes;
  doc["unique_bytes"] = s.unique_bytes;
  doc["duplicates_checked"] = s.duplicates_checked;
  doc["elements"] = s.elements;
  auto totals = [](const std::vector<weights::Total>& list, const char* key) {
    json out = json::array();
    for (const auto& t : list) {
      out.push_back({{key, t.key}, {"tensors", t.tensors}, {"elements", t.elements}, {"bytes", t.bytes}});
    }
    return out;
  };
  doc["by_dtype"] = totals(s.by_dtype, "dtype");
  doc["by_layer"] = totals(s.by_layer, "layer");
  json duplicates = json::array();
  for (const auto& d : s.duplicates) duplicates.push_back({{"tensors", d.names}, {"bytes", d.bytes}});
  doc["duplicates"] = duplicates;
  json tensors = json::array();
  for (const auto& t : s.file.tensors) {
    tensors.push_back({{"name", t.name},
                       {"dtype", t.dtype},
                       {"shape", t.shape},
                       {"bytes", t.bytes},
                       {"file", t.file},
                       {"offset", t.offset}});
  }
  doc["tensors"] = tensors;
  doc["metadata"] = s.file.metadata;
  return doc;
}

}  // namespace gpumem
