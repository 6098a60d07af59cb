#include <algorithm>
#include "gpumem/common/flag_names.h"

#include <fmt/format.h>

#include "gpumem/common/units.h"
#include "gpumem/report/summary.h"
#include "gpumem/report/train_report.h"

namespace gpumem {

using train::Allocation;
using train::Category;
using train::TrainingStep;

std::vector<const Allocation*> largest_at_peak(const TrainingStep& s, int top) {
  std::vector<const Allocation*> live;
  for (const auto& a : s.allocations) {
    if (a.alloc_time <= s.peak_time && s.peak_time < a.free_time) live.push_back(&a);
  }
  std::stable_sort(live.begin(), live.end(), [](const auto* a, const auto* b) { return a->bytes > b->bytes; });
  if (live.size() > static_cast<size_t>(std::max(top, 0))) live.resize(static_cast<size_t>(std::max(top, 0)));
  return live;
}

std::string render_largest_at_peak(const TrainingStep& s, int top) {
  const auto largest = largest_at_peak(s, top);
  if (largest.empty()) return "";
  std::string out = "\nLargest tensors live at the peak\n";
  for (const auto* a : largest) {
    out += fmt::format("  {:>12}  {:<18} {}  ({})\n", format_bytes(a->bytes), to_string(a->category), a->tensor, a->op);
  }
  return out;
}

namespace {

constexpr train::Phase kPhases[] = {train::Phase::kResident, train::Phase::kForward, train::Phase::kLoss,
                                    train::Phase::kBackward, train::Phase::kOptimizer};

}  // namespace

std::string step_settings(const train::TrainOptions& o) {
  return fmt::format("{}, {}, loss {}, grads {}, {} step, device {}{}{}", to_string(o.optimizer),
                     to_string(o.precision), to_string(o.loss), o.grads_set_to_none ? "set to none" : "zeroed",
                     o.first_step ? "first" : "steady", to_string(o.device),
                     o.foreach ? (*o.foreach ? ", foreach" : ", for-loop") : "",
                     o.torch ? ", torch " + o.torch->str() : "");
}

nlohmann::ordered_json batch_axis_json(const BatchAxis& axis) {
  using json = nlohmann::ordered_json;
  return {{"size", axis.value > 0 ? json(axis.value) : json(nullptr)},
          {"input", axis.input},
          {"dimension", axis.symbol.empty() ? json(axis.axis) : json(axis.symbol)},
          {"evidence", axis.evidence},
          {"assumed", axis.assumed}};
}

std::string render_train_text(const TrainingStep& s, const train::DeviceMemory& d, const Verdict& verdict, int top) {
  std::string out;
  auto line = [&out](const std::string& l = {}) { out += l + "\n"; };
  if (!s.traced) {
    line(fmt::format("Training step {} (predicted)", s.model));
    line(fmt::format("            {}", step_settings(s.options)));
  } else {
    line(fmt::format("Training step {} (traced: {})", s.model, s.traced->with));
    line(fmt::format("            {}, {}, device {}", s.traced->optimizer, s.traced->precision,
                     to_string(s.options.device)));
  }
  if (s.batch_axis.value > 0) {
    line(fmt::format("Batch       {}: {}", s.batch_axis.value, s.batch_axis.describe()));
  }
  line(fmt::format("Parameters  {} trainable, {} frozen ({})", format_count(s.trainable_parameters),
                   format_count(s.frozen_parameters), format_bytes(s.parameter_bytes)));
  line();
  const bool cpu = s.options.device == train::Device::kCpu;
  if (verdict.decided()) line("Verdict     " + verdict_line(verdict));
  line(fmt::format("Needs       {:>12}  {}", format_bytes(verdict.device_bytes),
                   cpu ? std::string("the tensors' peak: the CPU keeps no cache")
                       : fmt::format("the least GPU the step runs on: the {} allocator, capped, returns its cache "
                                     "and retries; overhead included",
                                     d.allocator)));
  line(fmt::format("  {:<18}{:>12}  {}", "reserved", format_bytes(d.reserved_peak),
                   cpu ? std::string("no cache on the CPU: what is allocated")
                       : fmt::format("unconstrained: the step replayed under the {} allocator on a GPU with room to "
                                     "spare (max_memory_reserved)",
                                     d.allocator)));
  line(fmt::format("  {:<18}{:>12}  {}", "overhead", format_bytes(d.overhead),
                   cpu                        ? "none on the CPU"
                   : s.options.overhead_bytes ? "CUDA context and workspaces (" GPUMEM_FLAG_OVERHEAD ")"
                                              : "CUDA context and workspaces: a stated default, " GPUMEM_FLAG_OVERHEAD
                                                " to set it"));
  line(fmt::format("Allocated   {:>12}  in {} at '{}': the tensors' peak (max_memory_allocated)",
                   format_bytes(s.peak_bytes), to_string(s.peak_phase), s.peak_op));
  for (const auto& row : report::train_summary(s, verdict).breakdown) {
    line(fmt::format("  {:<18}{:>12}", row.name, format_bytes(row.bytes)));
  }
  line(fmt::format("Steady      {:>12}  carried from step to step: weights and optimizer states{}",
                   format_bytes(s.steady_state_bytes), s.options.grads_set_to_none ? "" : " and gradients"));
  line(fmt::format("Static      {:>12}  weights + gradients + optimizer states, what the usual estimators count;",
                   format_bytes(s.static_estimate_bytes)));
  line(fmt::format("            activations and temporaries add {}",
                   format_bytes(s.peak_bytes > s.static_estimate_bytes ? s.peak_bytes - s.static_estimate_bytes : 0)));
  line();
  line(fmt::format("{:<12}{:>12}  {:>12}", "phase", "allocated", "peak live"));
  for (const auto phase : kPhases) {
    const int p = static_cast<int>(phase);
    line(fmt::format("  {:<10}{:>12}  {:>12}", to_string(phase), format_bytes(s.allocated_in_phase[p]),
                     format_bytes(s.peak_in_phase[p])));
  }
  out += render_largest_at_peak(s, top);
  if (!s.assumptions.empty()) {
    line();
    line(fmt::format("Assumptions: {} op(s) without a rule, counted conservatively:", s.assumptions.size()));
    for (size_t i = 0; i < s.assumptions.size() && i < 10; ++i) line("  " + s.assumptions[i]);
    if (s.assumptions.size() > 10)
      line(fmt::format("  and {} more (see " GPUMEM_FLAG_JSON ")", s.assumptions.size() - 10));
  }
  return out;
}

nlohmann::ordered_json train_to_json(const TrainingStep& s, const train::DeviceMemory& d, const Verdict& verdict,
                                     int top) {
  using json = nlohmann::ordered_json;
  const auto& o = s.options;
  json doc;
  doc["schema_version"] = kTrainSchemaVersion;
  doc["model"] = s.model;
  doc["source"] = s.traced ? "traced" : "predicted";
  doc["traced_with"] = s.traced ? json(s.traced->with) : json(nullptr);
  doc["settings"] = {{"optimizer", to_string(o.optimizer)},
                     {"precision", to_string(o.precision)},
                     {"loss", to_string(o.loss)},
                     {"frozen", o.frozen},
                     {"grads", o.grads_set_to_none ? "set-to-none" : "zero"},
                     {"step", o.first_step ? "first" : "steady"},
                     {"device", to_string(o.device)},
                     {"foreach", o.foreach ? json(*o.foreach) : json(nullptr)},
                     {"torch", o.torch ? json(o.torch->str()) : json(nullptr)},
                     {"allocator", d.allocator.empty() ? json(nullptr) : json(d.allocator)},
                     {"overhead_bytes", d.overhead}};
  if (s.traced) {
    // The step PyTorch ran: its optimizer and precision as the trace names
    // them; what the trace does not state is null.
    auto& settings = doc["settings"];
    settings["optimizer"] = s.traced->optimizer;
    settings["precision"] = s.traced->precision;
    for (const char* unknown : {"loss", "frozen", "foreach", "torch"}) settings[unknown] = nullptr;
  }
  doc["batch"] = s.batch_axis.value > 0 ? nlohmann::ordered_json(s.batch_axis.value) : nlohmann::ordered_json(nullptr);
  doc["batch_axis"] = batch_axis_json(s.batch_axis);
  doc["parameters"] = {
      {"trainable", s.trainable_parameters}, {"frozen", s.frozen_parameters}, {"bytes", s.parameter_bytes}};
  doc["allocated_peak_bytes"] = d.allocated_peak;
  doc["reserved_peak_bytes"] = d.reserved_peak;  // unconstrained
  doc["device_bytes"] = verdict.device_bytes;    // the least device the step runs in
  doc["verdict"] = verdict_json(verdict);
  doc["peak_bytes"] = s.peak_bytes;
  doc["peak_phase"] = to_string(s.peak_phase);
  doc["peak_op"] = s.peak_op;
  json breakdown;
  for (int c = 0; c < train::kCategories; ++c) breakdown[to_string(static_cast<Category>(c))] = s.breakdown[c];
  doc["breakdown"] = breakdown;
  doc["steady_state_bytes"] = s.steady_state_bytes;
  doc["static_estimate_bytes"] = s.static_estimate_bytes;
  json phases = json::array();
  for (const auto phase : kPhases) {
    const int p = static_cast<int>(phase);
    phases.push_back({{"phase", to_string(phase)},
                      {"allocated_bytes", s.allocated_in_phase[p]},
                      {"peak_bytes", s.peak_in_phase[p]}});
  }
  doc["phases"] = phases;
  json largest = json::array();
  for (const auto* a : largest_at_peak(s, top)) {
    largest.push_back(
        {{"tensor", a->tensor}, {"op", a->op}, {"category", to_string(a->category)}, {"bytes", a->bytes}});
  }
  doc["largest_at_peak"] = largest;
  json timeline = json::array();
  for (const auto& p : s.timeline) {
    timeline.push_back({{"time", p.time}, {"phase", to_string(p.phase)}, {"op", p.op}, {"live_bytes", p.live_bytes}});
  }
  doc["timeline"] = timeline;
  doc["assumptions"] = s.assumptions;
  doc["warnings"] = s.warnings;
  return doc;
}

}  // namespace gpumem
