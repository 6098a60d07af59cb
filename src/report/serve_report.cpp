#include "gpumem/report/serve_report.h"

#include <functional>

#include <fmt/format.h>

#include "gpumem/common/units.h"

namespace gpumem {
namespace {

using serve::PolicyRun;

std::string row(const std::string& label, const std::vector<PolicyRun>& runs,
                const std::function<std::string(const PolicyRun&)>& cell) {
  std::string out = fmt::format("  {:<22}", label);
  for (const PolicyRun& r : runs) out += fmt::format("{:>14}", cell(r));
  return out + "\n";
}

std::string percent(double f) { return fmt::format("{:.1f}%", 100 * f); }
std::string seconds(double s) { return fmt::format("{:.2f} s", s); }

}  // namespace

std::string render_serve_text(const serve::ServeSimulation& sim) {
  const auto& s = sim.setup;
  std::string out;
  out += fmt::format("Model       {}\n", s.model_source);
  out += fmt::format("Engine      {}\n", s.engine);
  out += fmt::format("GPU         {}: weights {} + activations {} + overhead {}, KV cache {}\n",
                     format_bytes(s.gpu_bytes), format_bytes(s.weights_bytes), format_bytes(s.activation_bytes),
                     format_bytes(s.overhead_bytes), format_bytes(s.kv_budget_bytes));
  out += fmt::format("KV cache    {} per token, {} tokens, blocks of {}; max_model_len {}\n",
                     format_bytes(s.kv_bytes_per_token), format_count(s.kv_budget_bytes / s.kv_bytes_per_token),
                     s.scheduler.block_tokens, s.scheduler.max_model_len);
  out += fmt::format("Requests    {} over {:.1f} s, prompts {:.1f} and outputs {:.1f} tokens on average\n",
                     format_count(sim.requests), sim.trace_span_s, sim.mean_prompt_tokens, sim.mean_output_tokens);
  out += fmt::format("Time model  max(compute at {:.1f} TFLOP/s, memory at {:.2f} TB/s) + {:.2f} ms per step\n\n",
                     s.time.flops_per_s / 1e12, s.time.bytes_per_s / 1e12, s.time.step_overhead_s * 1e3);
  const auto& runs = sim.runs;
  out += row("policy", runs, [](const PolicyRun& r) { return r.name; });
  out += row("completed", runs, [](const PolicyRun& r) { return format_count(r.completed); });
  out += row("throughput (tok/s)", runs,
             [](const PolicyRun& r) { return fmt::format("{:.1f}", r.throughput_tokens_per_s); });
  out += row("KV utilisation mean", runs, [](const PolicyRun& r) { return percent(r.kv_utilization_mean); });
  out += row("KV utilisation peak", runs, [](const PolicyRun& r) { return percent(r.kv_utilization_peak); });
  out += row("waste", runs, [](const PolicyRun& r) { return percent(r.waste_fraction); });
  out += row("prefix hit rate", runs, [](const PolicyRun& r) { return percent(r.prefix_hit_rate); });
  out += row("preemptions", runs, [](const PolicyRun& r) { return format_count(r.preemptions); });
  out += row("recomputed tokens", runs, [](const PolicyRun& r) { return format_count(r.recomputed_tokens); });
  out += row("peak running", runs, [](const PolicyRun& r) { return format_count(r.peak_running); });
  out += row("TTFT p50", runs, [](const PolicyRun& r) { return seconds(r.ttft_p50_s); });
  out += row("TTFT p99", runs, [](const PolicyRun& r) { return seconds(r.ttft_p99_s); });
  out += row("latency p50", runs, [](const PolicyRun& r) { return seconds(r.latency_p50_s); });
  out += row("latency p99", runs, [](const PolicyRun& r) { return seconds(r.latency_p99_s); });
  out += row("makespan", runs, [](const PolicyRun& r) { return seconds(r.end_s - r.first_arrival_s); });
  return out;
}

nlohmann::ordered_json serve_to_json(const serve::ServeSimulation& sim) {
  const auto& s = sim.setup;
  nlohmann::ordered_json j;
  j["schema_version"] = kServeSchemaVersion;
  j["model"] = s.model_source;
  j["engine"] = s.engine;
  j["gpu_bytes"] = s.gpu_bytes;
  j["weights_bytes"] = s.weights_bytes;
  j["activation_bytes"] = s.activation_bytes;
  j["overhead_bytes"] = s.overhead_bytes;
  j["kv_budget_bytes"] = s.kv_budget_bytes;
  j["kv_bytes_per_token"] = s.kv_bytes_per_token;
  j["block_tokens"] = s.scheduler.block_tokens;
  j["max_model_len"] = s.scheduler.max_model_len;
  j["token_budget"] = s.scheduler.token_budget;
  j["max_sequences"] = s.scheduler.max_sequences;
  j["time_model"] = {{"flops_per_s", s.time.flops_per_s},
                     {"bytes_per_s", s.time.bytes_per_s},
                     {"step_overhead_s", s.time.step_overhead_s}};
  j["requests"] = sim.requests;
  j["trace_span_s"] = sim.trace_span_s;
  j["mean_prompt_tokens"] = sim.mean_prompt_tokens;
  j["mean_output_tokens"] = sim.mean_output_tokens;
  auto& policies = j["policies"] = nlohmann::ordered_json::array();
  for (const PolicyRun& r : sim.runs) {
    nlohmann::ordered_json p;
    p["name"] = r.name;
    p["completed"] = r.completed;
    p["output_tokens"] = r.output_tokens;
    p["makespan_s"] = r.end_s - r.first_arrival_s;
    p["throughput_tokens_per_s"] = r.throughput_tokens_per_s;
    p["kv_utilization_mean"] = r.kv_utilization_mean;
    p["kv_utilization_peak"] = r.kv_utilization_peak;
    p["waste_fraction"] = r.waste_fraction;
    p["preemptions"] = r.preemptions;
    p["recomputed_tokens"] = r.recomputed_tokens;
    p["swapped_bytes"] = r.swapped_bytes;
    p["prefix_hit_rate"] = r.prefix_hit_rate;
    p["prefix_hit_tokens"] = r.prefix_hit_tokens;
    p["prefix_query_tokens"] = r.prefix_query_tokens;
    p["peak_running"] = r.peak_running;
    p["p50_ttft_s"] = r.ttft_p50_s;
    p["p99_ttft_s"] = r.ttft_p99_s;
    p["p50_latency_s"] = r.latency_p50_s;
    p["p99_latency_s"] = r.latency_p99_s;
    p["steps"] = r.steps;
    p["kv_utilization_interval_s"] = r.series_interval_s;
    p["kv_utilization_series"] = r.kv_utilization_series;
    policies.push_back(std::move(p));
  }
  return j;
}

}  // namespace gpumem
