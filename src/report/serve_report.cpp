#include "gpumem/report/serve_report.h"

#include <functional>

#include <fmt/format.h>

#include "gpumem/common/units.h"

namespace gpumem {
namespace {

using serve::PolicyRun;

std::string percent(double f) { return fmt::format("{:.1f}%", 100 * f); }
std::string seconds(double s) { return fmt::format("{:.2f} s", s); }

}  // namespace

std::vector<std::pair<std::string, std::vector<std::string>>> serve_rows(const serve::ServeSimulation& sim) {
  using Cell = std::function<std::string(const PolicyRun&)>;
  const std::vector<std::pair<std::string, Cell>> columns = {
      {"policy", [](const PolicyRun& r) { return r.name; }},
      {"completed", [](const PolicyRun& r) { return format_count(r.completed); }},
      {"throughput (tok/s)", [](const PolicyRun& r) { return fmt::format("{:.1f}", r.throughput_tokens_per_s); }},
      {"KV utilisation mean", [](const PolicyRun& r) { return percent(r.kv_utilization_mean); }},
      {"KV utilisation peak", [](const PolicyRun& r) { return percent(r.kv_utilization_peak); }},
      {"waste", [](const PolicyRun& r) { return percent(r.waste_fraction); }},
      {"prefix hit rate", [](const PolicyRun& r) { return percent(r.prefix_hit_rate); }},
      {"preemptions", [](const PolicyRun& r) { return format_count(r.preemptions); }},
      {"recomputed tokens", [](const PolicyRun& r) { return format_count(r.recomputed_tokens); }},
      {"peak running", [](const PolicyRun& r) { return format_count(r.peak_running); }},
      {"TTFT p50", [](const PolicyRun& r) { return seconds(r.ttft_p50_s); }},
      {"TTFT p99", [](const PolicyRun& r) { return seconds(r.ttft_p99_s); }},
      {"latency p50", [](const PolicyRun& r) { return seconds(r.latency_p50_s); }},
      {"latency p99", [](const PolicyRun& r) { return seconds(r.latency_p99_s); }},
      {"makespan", [](const PolicyRun& r) { return seconds(r.end_s - r.first_arrival_s); }},
  };
  std::vector<std::pair<std::string, std::vector<std::string>>> rows;
  for (const auto& [label, cell] : columns) {
    std::vector<std::string> cells;
    for (const PolicyRun& r : sim.runs) cells.push_back(cell(r));
    rows.emplace_back(label, std::move(cells));
  }
  return rows;
}

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
  for (const auto& [label, cells] : serve_rows(sim)) {
    out += fmt::format("  {:<22}", label);
    for (const auto& cell : cells) out += fmt::format("{:>14}", cell);
    out += "\n";
  }
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
