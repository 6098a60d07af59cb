#include "gpumem/report/finetune_report.h"

#include <fmt/format.h>

#include "gpumem/common/units.h"
#include "gpumem/common/verdict.h"
#include "gpumem/report/summary.h"
#include "gpumem/report/train_report.h"

namespace gpumem {
namespace {

using finetune::FinetunePlan;
using train::Category;

// The peak by what the bytes are for: the step's categories, with the
// weights split into frozen and trainable and the logits apart (they are
// often the largest single thing at the peak). Sums to the peak.
std::string settings(const finetune::FinetuneOptions& o) {
  std::string method = to_string(o.method);
  if (o.method == finetune::FinetuneMethod::kLora || o.method == finetune::FinetuneMethod::kQlora) {
    std::string targets;
    for (const auto& t : o.lora_targets) targets += (targets.empty() ? "" : ",") + t;
    method += fmt::format(" r {} on {}", o.lora_r, targets);
    if (o.lora_dropout > 0) method += fmt::format(", dropout {}", o.lora_dropout);
    if (o.method == finetune::FinetuneMethod::kQlora) method += fmt::format(", base {}", to_string(o.quant));
  }
  if (o.method == finetune::FinetuneMethod::kFreeze)
    method += fmt::format(" (last {} layers train)", o.freeze_trainable_layers);
  const auto& t = o.train;
  return fmt::format("{}; {} x {} tokens{}; {}, {}, attention {}{}{}{}; device {}", method, o.micro_batch, o.seq,
                     o.grad_accum > 1 ? fmt::format(" x {} accumulated", o.grad_accum) : "", to_string(t.optimizer),
                     to_string(t.precision), to_string(o.attention),
                     o.checkpointing ? ", checkpointing every layer" : "",
                     t.foreach ? (*t.foreach ? ", foreach" : ", for-loop") : "",
                     t.torch ? ", torch " + t.torch->str() : "", to_string(t.device));
}

}  // namespace

std::string render_finetune_text(const FinetunePlan& p, int top) {
  const auto& f = p.step;
  const auto& s = f.step;
  std::string out;
  auto line = [&out](const std::string& l = {}) { out += l + "\n"; };
  line(fmt::format("Fine-tune   {} (predicted)", s.model));
  line(fmt::format("            {}", settings(f.options)));
  line(fmt::format("Parameters  {} trainable of {} ({:.2f}%)", format_count(f.trainable_parameters),
                   format_count(f.total_parameters),
                   f.total_parameters
                       ? 100.0 * static_cast<double>(f.trainable_parameters) / static_cast<double>(f.total_parameters)
                       : 0.0));
  line();
  const bool cpu = f.options.train.device == train::Device::kCpu;
  if (p.per_gpu) {
    line(fmt::format("Device      {:>12}  reserved {} + overhead {}{}, on one GPU",
                     format_bytes(p.device.device_bytes()), format_bytes(p.device.reserved_peak),
                     format_bytes(p.device.overhead),
                     cpu ? " (CPU: no cache)" : fmt::format(" ({} allocator)", p.device.allocator)));
  } else {
    line(fmt::format("Needs       {:>12}  {}", format_bytes(p.verdict.device_bytes),
                     cpu ? std::string("the tensors' peak: the CPU keeps no cache")
                         : fmt::format("the least GPU the step runs on: the {} allocator, capped, returns its cache "
                                       "and retries; overhead {} included",
                                       p.device.allocator, format_bytes(p.device.overhead))));
  }
  line(fmt::format("Allocated   {:>12}  peak in {} at '{}' (max_memory_allocated)", format_bytes(s.peak_bytes),
                   to_string(s.peak_phase), s.peak_op));
  for (const auto& part : report::finetune_summary(p).breakdown)
    line(fmt::format("  {:<18}{:>12}  {}", part.name, format_bytes(part.bytes), part.meaning));
  out += render_largest_at_peak(s, top);
  if (p.per_gpu) {
    const auto& g = *p.per_gpu;
    line();
    line(fmt::format("Per GPU     {:>12}  {} GPUs, {}{}: the step's micro-batch on each", format_bytes(g.device_bytes),
                     g.gpus, g.plan.engine, g.plan.setting == "none" ? "" : " " + g.plan.setting));
    line(fmt::format("  {:<18}{:>12}", "frozen_weights", format_bytes(g.frozen_bytes)));
    line(fmt::format("  {:<18}{:>12}", "weights", format_bytes(g.plan.weight_bytes)));
    line(fmt::format("  {:<18}{:>12}", "gradients", format_bytes(g.plan.gradient_bytes)));
    line(fmt::format("  {:<18}{:>12}", "optimizer", format_bytes(g.plan.optimizer_bytes)));
    line(fmt::format("  {:<18}{:>12}", "buffers", format_bytes(g.plan.buffer_bytes)));
    line(fmt::format("  {:<18}{:>12}", "activations", format_bytes(g.plan.activation_bytes)));
    line(fmt::format("  {:<18}{:>12}", "overhead", format_bytes(g.overhead_bytes)));
    if (g.plan.cpu_bytes)
      line(fmt::format("  {:<18}{:>12}  in CPU memory", "offloaded", format_bytes(g.plan.cpu_bytes)));
  }
  if (p.gpu_bytes != 0) {
    line();
    line("Verdict     " + verdict_line(p.verdict));
    if (p.max_seq || p.max_micro_batch) line();
  }
  if (p.gpu_bytes != 0 && (p.max_seq || p.max_micro_batch)) {
    if (p.max_seq) {
      line(fmt::format("Longest seq     {} tokens at micro-batch {}{}", format_count(*p.max_seq), f.options.micro_batch,
                       p.max_seq_capped ? " (max_position_embeddings; memory allows more)" : ""));
    }
    if (p.max_micro_batch)
      line(fmt::format("Largest batch   {} sequences of {} tokens", *p.max_micro_batch, f.options.seq));
  }
  if (!p.changes.empty()) {
    line();
    line("Single changes");
    for (const auto& c : p.changes) {
      line(fmt::format("  {:<42} {:>12}  {}  ({})", c.what, format_bytes(c.device_bytes),
                       c.fits ? "fits" : "does not fit", c.cost));
    }
  }
  return out;
}

nlohmann::ordered_json finetune_to_json(const FinetunePlan& p, int top) {
  using json = nlohmann::ordered_json;
  const auto& f = p.step;
  const auto& s = f.step;
  const auto& o = f.options;
  json doc;
  doc["schema_version"] = kFinetuneSchemaVersion;
  doc["model"] = s.model;
  doc["settings"] = {{"method", to_string(o.method)},
                     {"lora_r", o.lora_r},
                     {"lora_targets", o.lora_targets},
                     {"lora_dropout", o.lora_dropout},
                     {"quant", to_string(o.quant)},
                     {"seq", o.seq},
                     {"micro_batch", o.micro_batch},
                     {"grad_accum", o.grad_accum},
                     {"checkpointing", o.checkpointing ? "layers" : "none"},
                     {"attention", to_string(o.attention)},
                     {"optimizer", to_string(o.train.optimizer)},
                     {"precision", to_string(o.train.precision)},
                     {"device", to_string(o.train.device)},
                     {"allocator", p.device.allocator.empty() ? json(nullptr) : json(p.device.allocator)},
                     {"overhead_bytes", p.device.overhead}};
  doc["trainable_parameters"] = f.trainable_parameters;
  doc["total_parameters"] = f.total_parameters;
  doc["peak_bytes"] = s.peak_bytes;
  doc["reserved_peak_bytes"] = p.device.reserved_peak;
  doc["device_bytes"] = p.per_gpu ? p.device.device_bytes() : p.verdict.device_bytes;
  json parts;
  for (const auto& part : report::finetune_summary(p).breakdown) parts[part.name] = part.bytes;
  doc["breakdown"] = parts;
  doc["peak_phase"] = to_string(s.peak_phase);
  doc["peak_op"] = s.peak_op;
  json largest = json::array();
  for (const auto* a : largest_at_peak(s, top)) {
    largest.push_back(
        {{"tensor", a->tensor}, {"op", a->op}, {"category", to_string(a->category)}, {"bytes", a->bytes}});
  }
  doc["largest_at_peak"] = largest;
  doc["gpu_bytes"] = p.gpu_bytes ? json(p.gpu_bytes) : json(nullptr);
  doc["fits"] = p.gpu_bytes ? json(p.verdict.fits()) : json(nullptr);
  doc["verdict"] = verdict_json(p.verdict);
  doc["max_seq"] = p.max_seq ? json(*p.max_seq) : json(nullptr);
  doc["max_micro_batch"] = p.max_micro_batch ? json(*p.max_micro_batch) : json(nullptr);
  json changes = json::array();
  for (const auto& c : p.changes) {
    changes.push_back({{"change", c.what}, {"cost", c.cost}, {"device_bytes", c.device_bytes}, {"fits", c.fits}});
  }
  doc["changes"] = changes;
  if (p.per_gpu) {
    const auto& g = *p.per_gpu;
    doc["per_gpu"] = {{"gpus", g.gpus},
                      {"engine", g.plan.engine},
                      {"setting", g.plan.setting},
                      {"device_bytes", g.device_bytes},
                      {"frozen_weight_bytes", g.frozen_bytes},
                      {"weight_bytes", g.plan.weight_bytes},
                      {"gradient_bytes", g.plan.gradient_bytes},
                      {"optimizer_bytes", g.plan.optimizer_bytes},
                      {"buffer_bytes", g.plan.buffer_bytes},
                      {"activation_bytes", g.plan.activation_bytes},
                      {"overhead_bytes", g.overhead_bytes},
                      {"cpu_bytes", g.plan.cpu_bytes}};
  } else {
    doc["per_gpu"] = nullptr;
  }
  doc["assumptions"] = s.assumptions;
  return doc;
}

}  // namespace gpumem
