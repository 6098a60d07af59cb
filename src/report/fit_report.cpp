#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include "gpumem/common/flag_names.h"

#include "common/bounded_json.h"
#include "gpumem/common/units.h"
#include "gpumem/common/verdict.h"
#include "gpumem/report/fit_report.h"
#include "gpumem/report/summary.h"
#include "gpumem/report/train_report.h"
#include "gpumem/train/engine_config.h"

namespace gpumem {
namespace {

// A strategy's per-GPU bytes leave out what no allocator sees.
bool fits_per_gpu(const train::FitResult& f, const train::ShardingPlan& p) {
  return p.gpu_bytes_per_gpu + f.device.overhead <= f.budget;
}

}  // namespace

std::string render_fit_text(const train::FitResult& f) {
  std::string out;
  auto line = [&out](const std::string& l = {}) { out += l + "\n"; };
  const std::string where = f.sharding ? fmt::format("{} with {} {}", f.gpus > 1 ? " on each GPU" : "",
                                                     f.sharding->engine, f.sharding->setting)
                                       : "";
  const std::string accumulated =
      f.accumulation_steps > 1
          ? fmt::format(" x {} accumulation steps (batch {})", f.accumulation_steps, f.batch * f.accumulation_steps)
          : "";
  line(fmt::format("Fit         at batch {}{}{}: {}", f.batch, accumulated, where, verdict_line(f.verdict)));
  line("            " + step_settings(f.options));
  std::vector<std::string> levers;
  for (train::Lever l : f.levers) levers.emplace_back(to_string(l));
  const bool offload = std::find(f.levers.begin(), f.levers.end(), train::Lever::kOffload) != f.levers.end();
  line(fmt::format("            levers it may pull: {}{}",
                   levers.empty() ? "none" : fmt::format("{}", fmt::join(levers, ", ")),
                   offload || f.gpus > 1 ? "" : " (offload to CPU memory only with " GPUMEM_FLAG_OFFLOAD ")"));
  if (f.step.batch_axis.value > 0) line("            batch: " + f.step.batch_axis.describe());
  if (f.sharding) {
    line(
        fmt::format("            = {} per GPU (model states as the engine shards them, communication buffers, "
                    "activations{}) + {} overhead; the engines' figures, not replayed",
                    format_bytes(f.sharding->gpu_bytes_per_gpu), f.per_gpu_checkpointed ? " with checkpointing" : "",
                    format_bytes(f.device.overhead)));
  } else if (f.device.allocator.empty()) {
    line("            on the CPU: the tensors' peak, nothing cached, no overhead");
  } else {
    line(
        fmt::format("            needs: the least GPU the {} allocator runs the step on (capped, it returns its "
                    "cache and retries), overhead {} included; tensors' peak {}",
                    f.device.allocator, format_bytes(f.device.overhead), format_bytes(f.device.allocated_peak)));
    line(fmt::format("            reserved at most {} {}", format_bytes(f.device.reserved_peak),
                     f.device.runs_out
                         ? "unconstrained (it runs out on this GPU)"
                         : fmt::format("on this GPU (capped at {} less the overhead)", format_bytes(f.budget))));
  }
  const report::Summary summary = report::fit_summary(f);
  {
    std::string parts;
    for (const auto& row : summary.breakdown)
      if (row.bytes) parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", row.name, format_bytes(row.bytes));
    line("            allocated at the peak: " + parts);
  }
  if (!f.why_not.empty()) line("Why         " + f.why_not);
  if (f.max_batch_without_checkpointing) {
    line(fmt::format("Max batch   {} (the next, {}: {}); without checkpointing: {}", f.batch, f.batch + 1,
                     f.next_batch_peak ? verdict_brief(Verdict{f.budget, *f.next_batch_peak}) : std::string("?"),
                     *f.max_batch_without_checkpointing));
  }
  if (!f.changes.empty()) {
    line();
    line("Changes, cheapest first");
    for (const auto& c : summary.changes) {
      line(fmt::format("  {:<28} {:>12} -> {:>12}  {}", c.change, format_bytes(c.before), format_bytes(c.after),
                       c.cost));
    }
  }
  if (!f.checkpoint.modules.empty()) {
    line();
    line(fmt::format("Checkpoint  {} segment(s) with torch.utils.checkpoint{}:", f.checkpoint.modules.size(),
                     f.checkpoint.optimal ? " (optimal for the chain of modules)" : ""));
    line(fmt::format("  {}", fmt::join(f.checkpoint.modules, ", ")));
    if (train::has_runs(f.checkpoint.modules)) {
      line("  FIRST..LAST: one checkpoint around that run of sibling modules, which the forward calls in a row");
    }
    line(fmt::format("  recomputes {} FLOPs, {:.1f}% of one forward pass", format_count(f.checkpoint.recompute_flops),
                     100 * f.checkpoint.recompute_fraction));
    line("  " GPUMEM_FLAG_EMIT " checkpoint writes checkpoint.py: apply(model) checkpoints them in the model as it is");
  }
  if (!f.per_gpu.empty()) {
    line();
    line(fmt::format("Per GPU     model states and activations, {} checkpointing, + {} overhead",
                     f.per_gpu_checkpointed ? "with" : "before", format_bytes(f.device.overhead)));
    line(fmt::format("  {:<10} {:<40} {:>12} {:>12}  {}", "engine", "setting", "per GPU", "CPU (node)", "fits"));
    for (const auto& p : f.per_gpu) {
      line(fmt::format("  {:<10} {:<40} {:>12} {:>12}  {}", p.engine, p.setting, format_bytes(p.gpu_bytes_per_gpu),
                       format_bytes(p.cpu_bytes), fits_per_gpu(f, p) ? "yes" : "no"));
    }
  }
  return out;
}

nlohmann::ordered_json fit_to_json(const train::FitResult& f) {
  using json = nlohmann::ordered_json;
  json doc;
  doc["schema_version"] = kFitSchemaVersion;
  doc["fits"] = f.verdict.fits();
  doc["verdict"] = verdict_json(f.verdict);
  doc["batch"] = f.batch;
  doc["accumulation_steps"] = f.accumulation_steps;
  doc["batch_axis"] = batch_axis_json(f.step.batch_axis);
  doc["budget_bytes"] = f.budget;
  doc["predicted_peak_bytes"] = f.predicted_peak;
  doc["allocated_peak_bytes"] = f.device.allocated_peak;
  doc["reserved_peak_bytes"] = f.device.reserved_peak;
  doc["device_bytes"] = f.device.device_bytes();
  doc["overhead_bytes"] = f.device.overhead;
  doc["allocator"] = f.device.allocator.empty() ? json(nullptr) : json(f.device.allocator);
  doc["device"] = to_string(f.options.device);
  doc["optimizer"] = to_string(f.options.optimizer);
  doc["precision"] = to_string(f.options.precision);
  doc["checkpoint"] = f.checkpoint.modules;
  doc["recompute_flops"] = f.checkpoint.recompute_flops;
  doc["recompute_fraction"] = f.checkpoint.recompute_fraction;
  doc["optimal"] = f.checkpoint.modules.empty() ? f.verdict.fits() : f.checkpoint.optimal;
  json changes = json::array();
  for (const auto& c : f.changes) {
    changes.push_back({{"change", c.change},
                       {"peak_before_bytes", c.peak_before},
                       {"peak_after_bytes", c.peak_after},
                       {"cost", c.cost}});
  }
  doc["changes"] = changes;
  json levers = json::array();
  for (train::Lever l : f.levers) levers.push_back(to_string(l));
  doc["levers"] = levers;
  doc["why_not"] = f.why_not.empty() ? json(nullptr) : json(f.why_not);
  doc["max_batch_without_checkpointing"] =
      f.max_batch_without_checkpointing ? json(*f.max_batch_without_checkpointing) : json(nullptr);
  doc["next_batch_peak_bytes"] = f.next_batch_peak ? json(*f.next_batch_peak) : json(nullptr);
  json tried = json::array();
  for (const auto& t : f.batches_tried) {
    tried.push_back({{"batch", t.batch}, {"fits", t.fits}, {"peak_bytes", t.peak_bytes}});
  }
  doc["batches_tried"] = tried;
  json per_gpu = json::array();
  for (const auto& p : f.per_gpu) {
    per_gpu.push_back({{"engine", p.engine},
                       {"setting", p.setting},
                       {"gpu_bytes", p.gpu_bytes_per_gpu},
                       {"cpu_bytes", p.cpu_bytes},
                       {"weight_bytes", p.weight_bytes},
                       {"gradient_bytes", p.gradient_bytes},
                       {"optimizer_bytes", p.optimizer_bytes},
                       {"buffer_bytes", p.buffer_bytes},
                       {"activation_bytes", p.activation_bytes},
                       {"fits", fits_per_gpu(f, p)}});
  }
  doc["per_gpu"] = per_gpu;
  doc["per_gpu_checkpointed"] = f.per_gpu_checkpointed;
  doc["sharding"] = f.sharding ? json{{"engine", f.sharding->engine},
                                      {"setting", f.sharding->setting},
                                      {"gpu_bytes", f.sharding->gpu_bytes_per_gpu}}
                               : json(nullptr);
  return doc;
}

std::pair<std::string, std::string> emitted_file(const train::FitResult& f, const std::string& kind) {
  if (kind == "checkpoint") {
    return {"checkpoint.py",
            train::checkpoint_snippet(
                f.checkpoint.modules,
                fmt::format("Activation checkpointing chosen by `gpumem fit` for batch {} within {}: it recomputes "
                            "{:.1f}% of a forward pass.",
                            f.batch, format_bytes(f.budget), 100 * f.checkpoint.recompute_fraction))};
  }
  // The lowest-memory plan of the engine, or the first of it that fits.
  const train::ShardingPlan* chosen = nullptr;
  const std::string engine = kind == "deepspeed" ? "deepspeed" : "fsdp";
  for (const auto& p : f.per_gpu) {
    if (p.engine != engine) continue;
    if (!chosen) chosen = &p;
    const bool fits = fits_per_gpu(f, p);
    const bool chosen_fits = fits_per_gpu(f, *chosen);
    if ((fits && !chosen_fits) || (!chosen_fits && p.gpu_bytes_per_gpu < chosen->gpu_bytes_per_gpu)) chosen = &p;
  }
  if (!chosen) return {kind, ""};
  if (kind == "deepspeed") {
    return {"ds_config.json",
            train::deepspeed_config_json(chosen->zero, f.options.precision, static_cast<uint64_t>(f.batch), {},
                                         static_cast<uint64_t>(f.accumulation_steps))};
  }
  train::FsdpWrap wrap;
  return {"fsdp_wrap.py", train::fsdp_snippet(chosen->fsdp, f.options.precision, wrap)};
}

}  // namespace gpumem
