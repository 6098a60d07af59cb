// The pages of weights, serve-sim, explain-oom and llm --engine vllm: each
// the rows its text report prints, as tables.
#include "gpumem/report/html/command_pages.h"

#include <algorithm>

#include <fmt/format.h>

#include "gpumem/common/units.h"
#include "gpumem/report/html/document.h"
#include "gpumem/report/quantize_report.h"
#include "gpumem/report/serve_report.h"
#include "gpumem/report/summary.h"
#include "report/html/summary_section.h"
#include "report/shape_text.h"

namespace gpumem::report {

std::string weights_html(const weights::WeightSummary& s, int top) {
  html::Document doc("Weights of " + s.file.path);
  doc.facts(
      {{"file", fmt::format("{} ({}, {})", s.file.path, s.file.format, format_bytes(s.file.file_bytes))},
       {"tensors", fmt::format("{} tensors, {} values", format_count(s.file.tensors.size()), format_count(s.elements))},
       {"tensor data", format_bytes(s.total_bytes)}});
  html::Table types;
  types.caption = "By type";
  types.header = {"type", "bytes", "tensors", "values"};
  for (const auto& d : s.by_dtype)
    types.rows.push_back({d.key, format_bytes(d.bytes), format_count(d.tensors), format_count(d.elements)});
  doc.table(types);
  if (!s.duplicates.empty()) {
    html::Table dup;
    dup.caption = "Stored twice or more";
    dup.header = {"tensors", "bytes"};
    for (const auto& d : s.duplicates) {
      std::string names;
      for (const auto& n : d.names) names += (names.empty() ? "" : " = ") + n;
      dup.rows.push_back({names, format_bytes(d.bytes)});
    }
    doc.table(dup);
  }
  std::vector<const weights::TensorEntry*> largest;
  for (const auto& t : s.file.tensors) largest.push_back(&t);
  std::stable_sort(largest.begin(), largest.end(), [](const auto* a, const auto* b) { return a->bytes > b->bytes; });
  if (largest.size() > static_cast<size_t>(std::max(top, 0))) largest.resize(static_cast<size_t>(std::max(top, 0)));
  if (!largest.empty()) {
    html::Table t;
    t.caption = "Largest tensors";
    t.header = {"tensor", "bytes", "type", "shape"};
    for (const auto* e : largest) t.rows.push_back({e->name, format_bytes(e->bytes), e->dtype, shape_text(e->shape)});
    doc.table(t);
  }
  return doc.html();
}

std::string serve_html(const serve::ServeSimulation& sim) {
  const auto& s = sim.setup;
  html::Document doc("Serving " + s.model_source);
  doc.facts(
      {{"model", s.model_source},
       {"engine", s.engine},
       {"GPU", fmt::format("{}: weights {} + activations {} + overhead {}, KV cache {}", format_bytes(s.gpu_bytes),
                           format_bytes(s.weights_bytes), format_bytes(s.activation_bytes),
                           format_bytes(s.overhead_bytes), format_bytes(s.kv_budget_bytes))},
       {"requests", fmt::format("{} over {:.1f} s", format_count(sim.requests), sim.trace_span_s)}});
  html::Table t;
  t.caption = "Each policy on the same requests";
  const auto rows = serve_rows(sim);
  t.header = {rows.front().first};
  t.header.insert(t.header.end(), rows.front().second.begin(), rows.front().second.end());
  for (size_t i = 1; i < rows.size(); ++i) {
    std::vector<std::string> row = {rows[i].first};
    row.insert(row.end(), rows[i].second.begin(), rows[i].second.end());
    t.rows.push_back(std::move(row));
  }
  doc.table(t);
  return doc.html();
}

std::string quantize_html(const weights::QuantizeReport& r) {
  html::Document doc("Quantize " + r.input);
  doc.facts({{"from", fmt::format("{} ({}, {})", r.input, r.format, format_bytes(r.input_file_bytes))},
             {"to", fmt::format("{} ({}, {})", r.output, r.type, format_bytes(r.output_file_bytes))},
             {"tensor data", fmt::format("{} -> {}", format_bytes(r.bytes_before), format_bytes(r.bytes_after))}});
  html::Table t;
  t.caption = "Each tensor";
  t.header = {"before", "after", "from", "to", "rmse", "max abs", "tensor"};
  t.rows = quantize_rows(r);
  doc.table(t);
  return doc.html();
}

std::string oom_html(const oom::OomExplanation& e) {
  const auto& m = e.message;
  const auto b = [](std::optional<uint64_t> v) { return v ? format_bytes(*v) : std::string("not in the message"); };
  html::Document doc(std::string("Out of memory: ") + to_string(e.diagnosis));
  doc.facts({{"wording", m.wording},
             {"requested", b(m.requested_bytes)},
             {"capacity", b(m.capacity_bytes)},
             {"free", b(m.free_bytes)},
             {"allocated by PyTorch", b(m.allocated_bytes)},
             {"reserved by PyTorch", b(m.reserved_bytes)}});
  doc.heading(std::string("Diagnosis: ") + to_string(e.diagnosis));
  doc.paragraph(e.meaning);
  html::Table t;
  t.header = {"try"};
  t.numeric_from_second = false;
  for (const auto& a : e.advice) t.rows.push_back({a});
  doc.table(t);
  return doc.html();
}

std::string vllm_html(const llm::LlmModel& m, const llm::VllmSizing& v,
                      const std::vector<llm::VllmQuantLevel>& levels) {
  html::Document doc("Serving " + m.source + " on vLLM");
  doc.facts({{"model", fmt::format("{} ({}, {})", m.source, m.format, m.weight_dtype)},
             {"engine", fmt::format("{} {}", v.rules.name, v.rules.version)},
             {"request", fmt::format("max_model_len {}, gpu_memory_utilization {:.2f}, {} GPU(s) x {}",
                                     format_count(v.request.max_model_len), v.request.gpu_memory_utilization,
                                     v.request.tensor_parallel, format_bytes(v.request.gpu_bytes))},
             {"GPU KV cache size", fmt::format("{} tokens", format_count(v.kv_tokens))}});
  Summary s;
  s.verdict = v.verdict;
  s.breakdown_title =
      fmt::format("The budget, {} x {:.2f}", format_bytes(v.request.gpu_bytes), v.request.gpu_memory_utilization);
  s.breakdown = {{"Weights", v.weights_bytes, "per GPU, with the rotary cache"},
                 {"Activations", v.activation_bytes, "the profile run's peak"},
                 {"Non-torch", v.non_torch_bytes, "cuBLAS and backend buffers"}};
  if (v.cuda_graph_in_budget) s.breakdown.push_back({"CUDA graphs", v.cuda_graph_bytes, "estimated"});
  if (v.kv_cache_bytes > 0)
    s.breakdown.push_back({"KV cache", static_cast<uint64_t>(v.kv_cache_bytes), "what is left"});
  s.changes_title = "Quantized checkpoints, the same request";
  for (const auto& q : levels)
    s.changes.push_back(
        {q.quant, v.verdict.device_bytes, q.verdict.device_bytes, q.verdict.fits() ? "fits" : "does not fit"});
  html::summary_section(doc, s);
  return doc.html();
}

}  // namespace gpumem::report
