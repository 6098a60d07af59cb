#include "gpumem/report/quantize_report.h"
#include "gpumem/common/flag_names.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpumem/common/error.h"
#include "gpumem/common/units.h"
#include "report/shape_text.h"

namespace gpumem {
namespace {

using report::shape_text;

// Errors in three significant digits: enough to compare tensors.
std::string error_text(double e) { return e == 0 ? "0" : fmt::format("{:.2e}", e); }

}  // namespace

double bits_per_weight(const weights::QuantizeReport& r) {
  return r.elements ? static_cast<double>(r.bytes_after) * 8.0 / static_cast<double>(r.elements) : 0.0;
}

std::vector<std::vector<std::string>> quantize_rows(const weights::QuantizeReport& r) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& t : r.tensors) {
    std::string tail = printable(t.name) + " " + shape_text(t.shape);
    if (!t.why.empty()) tail += "  " + t.why;
    rows.push_back({format_bytes(t.bytes_before), format_bytes(t.bytes_after), t.from, t.to, error_text(t.rmse),
                    error_text(t.max_abs), tail});
  }
  return rows;
}

std::string render_quantize_text(const weights::QuantizeReport& r) {
  std::string out;
  auto line = [&out](const std::string& l = {}) { out += l + "\n"; };
  line(fmt::format("Quantize    {} ({}, {}) -> {}", r.input, r.format, format_bytes(r.input_file_bytes), r.output));
  line(fmt::format("            {}{}, general.file_type {}; {} tensors, {} values, {} converted", r.type,
                   r.pure ? " " GPUMEM_FLAG_PURE : "", r.file_type, format_count(r.tensors.size()),
                   format_count(r.elements), format_count(r.converted)));
  if (!r.architecture.empty())
    line(fmt::format("            architecture {} (from {})", printable(r.architecture),
                     printable(r.architecture_from)));
  line();
  const double ratio = r.bytes_after ? static_cast<double>(r.bytes_before) / static_cast<double>(r.bytes_after) : 0;
  line(fmt::format("Tensor data {:>12} -> {:>12}  {:.2f}x smaller, {:.2f} bits per weight",
                   format_bytes(r.bytes_before), format_bytes(r.bytes_after), ratio, bits_per_weight(r)));
  line(fmt::format("File        {:>12} -> {:>12}  written in {:.2f} s", format_bytes(r.input_file_bytes),
                   format_bytes(r.output_file_bytes), r.seconds));
  const weights::QuantizedTensor* worst_rmse = nullptr;
  const weights::QuantizedTensor* worst_max = nullptr;
  for (const auto& t : r.tensors) {
    if (!worst_rmse || t.rmse > worst_rmse->rmse) worst_rmse = &t;
    if (!worst_max || t.max_abs > worst_max->max_abs) worst_max = &t;
  }
  if (worst_rmse && worst_max && worst_max->max_abs > 0) {
    line(fmt::format("Worst error rmse {} in '{}', max abs {} in '{}'", error_text(worst_rmse->rmse),
                     printable(worst_rmse->name), error_text(worst_max->max_abs), printable(worst_max->name)));
  }
  line();
  line(fmt::format("  {:>10}  {:>10}  {:<5} {:<5} {:>8}  {:>8}  {}", "before", "after", "from", "to", "rmse", "max abs",
                   "tensor"));
  for (const auto& c : quantize_rows(r)) {
    line(fmt::format("  {:>10}  {:>10}  {:<5} {:<5} {:>8}  {:>8}  {}", c[0], c[1], c[2], c[3], c[4], c[5], c[6]));
  }
  return out;
}

nlohmann::ordered_json quantize_to_json(const weights::QuantizeReport& r) {
  using json = nlohmann::ordered_json;
  json doc;
  doc["schema_version"] = kQuantizeSchemaVersion;
  doc["input"] = r.input;
  doc["output"] = r.output;
  doc["format"] = r.format;
  doc["type"] = r.type;
  doc["pure"] = r.pure;
  doc["file_type"] = r.file_type;
  doc["architecture"] = r.architecture.empty() ? json(nullptr) : json(r.architecture);
  doc["architecture_from"] = r.architecture_from.empty() ? json(nullptr) : json(r.architecture_from);
  doc["elements"] = r.elements;
  doc["bytes_before"] = r.bytes_before;
  doc["bytes_after"] = r.bytes_after;
  doc["bits_per_weight"] = bits_per_weight(r);
  doc["input_file_bytes"] = r.input_file_bytes;
  doc["output_file_bytes"] = r.output_file_bytes;
  doc["converted"] = r.converted;
  doc["seconds"] = r.seconds;
  json tensors = json::array();
  for (const auto& t : r.tensors) {
    tensors.push_back({{"name", t.name},
                       {"shape", t.shape},
                       {"from", t.from},
                       {"to", t.to},
                       {"why", t.why},
                       {"elements", t.elements},
                       {"bytes_before", t.bytes_before},
                       {"bytes_after", t.bytes_after},
                       {"rmse", t.rmse},
                       {"max_abs", t.max_abs}});
  }
  doc["tensors"] = tensors;
  return doc;
}

}  // namespace gpumem
