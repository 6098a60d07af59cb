#include <fmt/format.h>

#include "gpumem/common/units.h"
#include "gpumem/report/fit_report.h"

namespace gpumem {

std::string render_fit_text(const train::FitResult& f) {
  std::string out;
  auto line = [&out](const std::string& l = {}) { out += l + "\n"; };
  line(fmt::format("Fit         {} at batch {}: {}", f.fits ? "FITS" : "DOES NOT FIT", f.batch,
                   f.fits ? fmt::format("{} of {}", format_bytes(f.predicted_peak), format_bytes(f.budget))
                          : fmt::format("needs {}, {} over {}", format_bytes(f.predicted_peak),
                                        format_bytes(f.predicted_peak - f.budget), format_bytes(f.budget))));
  line(fmt::format("            {}, {}", to_string(f.options.optimizer), to_string(f.options.precision)));
  if (f.max_batch_without_checkpointing) {
    line(fmt::format("Max batch   {} (the next, {}, would need {}); without checkpointing: {}", f.batch, f.batch + 1,
                     f.next_batch_peak ? format_bytes(*f.next_batch_peak) : std::string("?"),
                     *f.max_batch_without_checkpointing));
  }
  if (!f.changes.empty()) {
    line();
    line("Changes, cheapest first");
    for (const auto& c : f.changes) {
      line(fmt::format("  {:<28} {:>12} -> {:>12}  {}", c.change, format_bytes(c.peak_before),
                       format_bytes(c.peak_after), c.cost));
    }
  }
  if (!f.checkpoint.modules.empty()) {
    line();
    line(fmt::format("Checkpoint  {} module(s) with torch.utils.checkpoint{}:", f.checkpoint.modules.size(),
                     f.checkpoint.optimal ? " (optimal for the chain of modules)" : ""));
    std::string list;
    for (const auto& m : f.checkpoint.modules) list += (list.empty() ? "" : ", ") + m;
    line("  " + list);
    line(fmt::format("  recomputes {} FLOPs, {:.1f}% of one forward pass", format_count(f.checkpoint.recompute_flops),
                     100 * f.checkpoint.recompute_fraction));
  }
  return out;
}

nlohmann::ordered_json fit_to_json(const train::FitResult& f) {
  using json = nlohmann::ordered_json;
  json doc;
  doc["schema_version"] = kFitSchemaVersion;
  doc["fits"] = f.fits;
  doc["batch"] = f.batch;
  doc["budget_bytes"] = f.budget;
  doc["predicted_peak_bytes"] = f.predicted_peak;
  doc["optimizer"] = to_string(f.options.optimizer);
  doc["precision"] = to_string(f.options.precision);
  doc["checkpoint"] = f.checkpoint.modules;
  doc["recompute_flops"] = f.checkpoint.recompute_flops;
  doc["recompute_fraction"] = f.checkpoint.recompute_fraction;
  doc["optimal"] = f.checkpoint.modules.empty() ? f.fits : f.checkpoint.optimal;
  json changes = json::array();
  for (const auto& c : f.changes) {
    changes.push_back({{"change", c.change},
                       {"peak_before_bytes", c.peak_before},
                       {"peak_after_bytes", c.peak_after},
                       {"cost", c.cost}});
  }
  doc["changes"] = changes;
  doc["max_batch_without_checkpointing"] =
      f.max_batch_without_checkpointing ? json(*f.max_batch_without_checkpointing) : json(nullptr);
  doc["next_batch_peak_bytes"] = f.next_batch_peak ? json(*f.next_batch_peak) : json(nullptr);
  json tried = json::array();
  for (const auto& t : f.batches_tried) {
    tried.push_back({{"batch", t.batch}, {"fits", t.fits}, {"peak_bytes", t.peak_bytes}});
  }
  doc["batches_tried"] = tried;
  return doc;
}

std::string checkpoint_plan_json(const train::FitResult& f) {
  nlohmann::ordered_json doc;
  doc["batch"] = f.batch;
  doc["budget_bytes"] = f.budget;
  doc["predicted_peak_bytes"] = f.predicted_peak;
  doc["checkpoint"] = f.checkpoint.modules;
  doc["recompute_fraction"] = f.checkpoint.recompute_fraction;
  doc["usage"] =
      "wrap each listed module's forward in torch.utils.checkpoint.checkpoint; module names as in "
      "model.named_modules()";
  return doc.dump(2) + "\n";
}

}  // namespace gpumem
