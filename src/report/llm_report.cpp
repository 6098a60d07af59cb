#include "gpumem/report/llm_report.h"
#include "gpumem/common/flag_names.h"

#include <map>

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/common/units.h"
#include "gpumem/common/verdict.h"
#include "gpumem/report/summary.h"

namespace gpumem {
namespace {

using llm::GpuMemory;
using llm::LlmPlan;

std::string kv_element(const llm::KvType& t) {
  if (t.block_values == 1) return fmt::format("{} B", t.block_bytes);
  return fmt::format("{}/{} B", t.block_bytes, t.block_values);
}

std::string kv_name(const llm::KvTypes& t) {
  return t.k.name == t.v.name ? t.k.name : t.k.name + " K, " + t.v.name + " V";
}

// "32 layers x 8 KV heads x 128 dims x 2 (K and V) x 2 B".
std::string kv_formula(const LlmPlan& p) {
  const auto& m = p.model;
  const auto& t = p.kv_types;
  if (m.head_dim_k == m.head_dim_v && t.k.name == t.v.name) {
    return fmt::format("{} layers x {} KV heads x {} dims x 2 (K and V) x {}", m.n_layer, m.n_head_kv, m.head_dim_k,
                       kv_element(t.k));
  }
  return fmt::format("{} layers x {} KV heads x ({} dims x {} + {} dims x {})", m.n_layer, m.n_head_kv, m.head_dim_k,
                     kv_element(t.k), m.head_dim_v, kv_element(t.v));
}

std::string verdict(uint64_t need, uint64_t have) { return verdict_brief(Verdict{have, need}); }

std::string by_dtype(const llm::LlmModel& m) {
  std::map<std::string, uint64_t> bytes;
  for (const auto& t : m.tensors) bytes[t.dtype] += t.bytes;
  std::string out;
  for (const auto& [dtype, b] : bytes) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", dtype, format_bytes(b));
  return out;
}

std::string gpu_line(const GpuMemory& g) {
  return fmt::format("weights {} + KV {} + activations {} + overhead {}{} = {}", format_bytes(g.weights_bytes),
                     format_bytes(g.kv_bytes), format_bytes(g.activation_bytes), format_bytes(g.overhead_bytes),
                     g.other_bytes ? " + staging " + format_bytes(g.other_bytes) : "", format_bytes(g.total()));
}

using json = nlohmann::ordered_json;

json model_json(const llm::LlmModel& m) {
  return json{{"source", m.source},
              {"format", m.format},
              {"architecture", m.architecture},
              {"layers", m.n_layer},
              {"embedding", m.n_embd},
              {"heads", m.n_head},
              {"kv_heads", m.n_head_kv},
              {"head_dim_k", m.head_dim_k},
              {"head_dim_v", m.head_dim_v},
              {"feed_forward", m.n_ff},
              {"vocab", m.n_vocab},
              {"training_context", m.n_ctx_train},
              {"sliding_window", m.sliding_window},
              {"window_rule", m.window_rule},
              {"tied_embeddings", m.tied_embeddings},
              {"parameters", m.parameters()},
              {"weight_dtype", m.weight_dtype}};
}

json engine_json(const llm::EngineRules& e) {
  return {
      {"name", e.name}, {"version", e.version}, {"releases", e.releases}, {"changes", e.changes}, {"source", e.source}};
}

std::string engine_line(const llm::EngineRules& e) {
  return fmt::format("Engine      {} {}: the rules of {}", e.name, e.version, e.releases);
}

}  // namespace

std::string render_llm_text(const LlmPlan& p) {
  const auto& m = p.model;
  const auto& r = p.request;
  std::string out;
  auto line = [&out](const std::string& l = {}) { out += l + "\n"; };
  line(fmt::format("Model       {} ({}, {})", one_line(m.source), m.format, one_line(m.architecture)));
  line(fmt::format("            {} layers, {} embd, {} heads ({} KV heads x {} dims), {} ff, {} vocab{}{}", m.n_layer,
                   m.n_embd, m.n_head, m.n_head_kv, m.head_dim_k, m.n_ff, format_count(m.n_vocab),
                   m.n_ctx_train ? fmt::format(", trained at {} tokens", format_count(m.n_ctx_train)) : "",
                   m.tied_embeddings ? ", tied embeddings" : ""));
  if (m.sliding_window > 0) {
    line(fmt::format("            sliding window of {} tokens on {} of {} layers: {}", format_count(m.sliding_window),
                     p.kv.windowed_layers, m.n_layer, m.window_rule));
  } else if (!m.window_rule.empty()) {
    line(fmt::format("            {}", m.window_rule));
  }
  line(fmt::format("Request     {} tokens x {} sequence{}, forwards of {} tokens, KV {}, flash attention {}, {} x {}",
                   format_count(p.context), r.batch, r.batch == 1 ? "" : "s", r.ubatch, kv_name(p.kv_types),
                   r.flash_attention ? "on" : "off", r.gpus, format_bytes(r.gpu_bytes)));
  line(engine_line(r.engine));
  const bool ollama = r.engine.is_ollama();
  // "-ngl N" in llama.cpp's words, "num_gpu N" in ollama's.
  const auto layers_flag = [&](uint32_t n) { return fmt::format("{} {}", ollama ? "num_gpu" : "-ngl", n); };
  line();
  line(fmt::format("Verdict     {}", verdict_line(p.verdict)));
  {
    std::string held;
    for (const auto& row : report::llm_summary(p).breakdown)
      held += fmt::format("{}{} {}", held.empty() ? "" : " + ", row.name, format_bytes(row.bytes));
    line(fmt::format("            {}: {}", r.gpus == 1 ? "on the GPU" : "on the fullest GPU", held));
  }
  if (r.gpus == 1) {
    line(
        fmt::format("            every layer and the output on the GPU ({}); the token embeddings ({}) stay in host "
                    "memory, as {} keeps them",
                    layers_flag(m.n_layer + 1), format_bytes(p.host_bytes),
                    ollama ? "ollama (llama.cpp underneath)" : "llama.cpp"));
  }
  if (!p.default_quant.empty()) {
    line(fmt::format(
        "            weights priced as {}: ollama's library tags are 4-bit (Q4_K_M) by default; " GPUMEM_FLAG_QUANT
        " f16 for a full-precision tag",
        p.default_quant));
  }
  if (!p.verdict.fits() && !p.quant_levels.empty()) {
    std::vector<std::string> fitting;
    for (const auto& q : p.quant_levels)
      if (q.verdict.fits()) fitting.push_back(q.quant);
    line(fmt::format(
        "            {}",
        fitting.empty()
            ? std::string("no quantization level fits: see the GPU layers and streaming below")
            : fmt::format("quantized it runs: " GPUMEM_FLAG_QUANT " {} (the largest that fits)", fitting.front())));
  }
  if (m.n_ctx_train != 0 && p.context > m.n_ctx_train) {
    line(fmt::format("Note        {} tokens is past the {} the model was trained at", format_count(p.context),
                     format_count(m.n_ctx_train)));
  }
  line();
  line(fmt::format("Weights     {:>11}  {} parameters: {}", format_bytes(m.weight_bytes()),
                   format_count(m.parameters()), by_dtype(m)));
  line(fmt::format("KV cache    {:>11}  {} per token = {}", format_bytes(p.kv.bytes),
                   format_bytes(p.kv.bytes_per_token), kv_formula(p)));
  line(fmt::format("                         x {} cells ({} tokens x {} sequence{}, in cells of {}){}",
                   format_count(p.kv.cells), format_count(p.context), r.batch, r.batch == 1 ? "" : "s",
                   r.flash_attention ? r.engine.ctx_padding : r.engine.ctx_padding_no_flash,
                   p.kv.windowed_layers
                       ? fmt::format("; {} windowed layers hold {} cells (window x sequences + {} tokens of forward)",
                                     p.kv.windowed_layers, format_count(p.kv.window_cells), r.ubatch)
                       : ""));
  line(fmt::format("Activations {:>11}  one forward's peak, at the {} stage:", format_bytes(p.forward.bytes),
                   p.forward.stage));
  for (const auto& t : p.forward.terms) {
    line(fmt::format("            {:>11}    {} = {}", format_bytes(t.bytes), t.name, t.formula));
  }
  line(fmt::format("Overhead    {:>11}  CUDA context and runtime (a stated constant; " GPUMEM_FLAG_OVERHEAD ")",
                   format_bytes(r.overhead_bytes)));
  line(fmt::format("Total       {:>11}  everything, the token embeddings too", format_bytes(p.single.total())));
  if (!p.quant_levels.empty()) {
    line();
    line("Quantized   every layer on the GPU, at this context and batch:");
    for (const auto& q : p.quant_levels) {
      line(fmt::format("  {:<8}  weights {:>11}  needs {:>11}  {}", q.quant, format_bytes(q.weights_bytes),
                       format_bytes(q.verdict.device_bytes), verdict_brief(q.verdict)));
    }
  }
  if (p.multi) {
    const auto& mg = *p.multi;
    line();
    if (mg.tensor_parallel_valid) {
      line(fmt::format("Tensor parallel x{}  per GPU: {}: {}", mg.gpus, gpu_line(mg.tensor_parallel),
                       verdict(mg.tensor_parallel.total(), r.gpu_bytes)));
    } else {
      line(fmt::format("Tensor parallel x{}  not possible: {} heads do not divide by {}", mg.gpus, m.n_head, mg.gpus));
    }
    for (size_t g = 0; g < mg.pipeline.size(); ++g) {
      line(fmt::format("Pipeline GPU {}  {} layers: {}: {}", g, mg.pipeline_layers[g], gpu_line(mg.pipeline[g]),
                       verdict(mg.pipeline[g].total(), r.gpu_bytes)));
    }
  }
  line();
  const std::string placement = r.gpus == 1                      ? ""
                                : p.multi->tensor_parallel_valid ? " (tensor parallel)"
                                                                 : " (pipeline)";
  if (p.max_context == 0) {
    line(fmt::format("Longest context   none fits at {} sequence{}{}", r.batch, r.batch == 1 ? "" : "s", placement));
  } else {
    line(fmt::format("Longest context   {} tokens per sequence at {} sequence{}{}{}", format_count(p.max_context),
                     r.batch, r.batch == 1 ? "" : "s", placement,
                     p.max_context_capped ? ": where the search stops (the training context or " GPUMEM_FLAG_CONTEXT
                                            "); memory allows more"
                                          : ""));
  }
  line(fmt::format("Largest batch     {} sequence{} of {} tokens{}", format_count(p.max_batch),
                   p.max_batch == 1 ? "" : "s", format_count(p.context), placement));
  const auto& o = p.offload;
  if (!o.fits) {
    line("GPU layers        none: activations and overhead alone do not fit");
  } else {
    line(fmt::format("GPU layers        {} of {} on one GPU ({}){}: {}", o.gpu_layers, m.n_layer,
                     layers_flag(o.gpu_layers == m.n_layer ? o.gpu_layers + 1 : o.gpu_layers),
                     o.gpu_layers == m.n_layer ? ", output layer too" : "", gpu_line(o.gpu)));
    line(fmt::format("                  host memory holds {} (the token embeddings{})", format_bytes(o.host_bytes),
                     o.gpu_layers == m.n_layer ? "" : ", the other layers and their KV cache"));
  }
  const auto& s = p.streaming;
  if (!s.possible) {
    line("Streaming         none: the KV cache, activations and staging buffers alone do not fit");
  } else if (s.streamed_layers == 0) {
    line("Streaming         not needed: every layer stays on the GPU");
  } else {
    line(fmt::format(
        "Streaming         one GPU: {} layers resident, {} streamed from pinned memory through 2 x {} staging",
        s.resident_layers, s.streamed_layers, format_bytes(s.staging_bytes / 2)));
    line(fmt::format("                  {} per token at {:.1f} GB/s: {:.1f} ms per token, at most {:.1f} tokens/s",
                     format_bytes(s.streamed_bytes_per_token), r.pcie_bytes_per_second / 1e9, s.seconds_per_token * 1e3,
                     1.0 / s.seconds_per_token));
  }
  return out;
}

nlohmann::ordered_json llm_to_json(const LlmPlan& p) {
  const auto& m = p.model;
  const auto& r = p.request;
  auto gpu = [](const GpuMemory& g) {
    return json{{"weights_bytes", g.weights_bytes},       {"kv_bytes", g.kv_bytes},
                {"activation_bytes", g.activation_bytes}, {"overhead_bytes", g.overhead_bytes},
                {"other_bytes", g.other_bytes},           {"total_bytes", g.total()}};
  };
  json doc;
  doc["schema_version"] = kLlmSchemaVersion;
  doc["engine"] = engine_json(r.engine);
  doc["model"] = model_json(m);
  doc["request"] = {{"context", p.context},
                    {"batch", r.batch},
                    {"ubatch", r.ubatch},
                    {"gpu_bytes", r.gpu_bytes},
                    {"gpus", r.gpus},
                    {"quant", r.quant},
                    {"kv_dtype_k", p.kv_types.k.name},
                    {"kv_dtype_v", p.kv_types.v.name},
                    {"flash_attention", r.flash_attention},
                    {"pcie_bytes_per_second", r.pcie_bytes_per_second}};
  doc["fits"] = p.verdict.fits();
  doc["verdict"] = verdict_json(p.verdict);
  doc["default_quant"] = p.default_quant.empty() ? json(nullptr) : json(p.default_quant);
  json levels = json::array();
  for (const auto& q : p.quant_levels)
    levels.push_back({{"quant", q.quant}, {"weights_bytes", q.weights_bytes}, {"verdict", verdict_json(q.verdict)}});
  doc["quant_levels"] = levels;
  doc["weights_bytes"] = m.weight_bytes();
  doc["kv_bytes_per_token"] = p.kv.bytes_per_token;
  doc["kv_bytes"] = p.kv.bytes;
  doc["activation_bytes"] = p.forward.bytes;
  doc["overhead_bytes"] = r.overhead_bytes;
  doc["total_bytes"] = p.single.total();
  doc["max_context"] = p.max_context;
  doc["max_context_capped"] = p.max_context_capped;
  doc["max_batch"] = p.max_batch;
  doc["gpu_layers"] = p.offload.fits ? json(p.offload.gpu_layers) : json(nullptr);
  json terms = json::array();
  for (const auto& t : p.forward.terms) terms.push_back({{"name", t.name}, {"formula", t.formula}, {"bytes", t.bytes}});
  doc["kv"] = {{"cells", p.kv.cells},
               {"k_bytes", p.kv.k_bytes},
               {"v_bytes", p.kv.v_bytes},
               {"windowed_layers", p.kv.windowed_layers},
               {"window_cells", p.kv.window_cells}};
  doc["activation"] = {{"stage", p.forward.stage}, {"terms", terms}};
  doc["offload"] = {{"gpu_layers", p.offload.gpu_layers},
                    {"fits", p.offload.fits},
                    {"gpu", gpu(p.offload.gpu)},
                    {"host_bytes", p.offload.host_bytes}};
  const auto& s = p.streaming;
  doc["streaming"] = {{"possible", s.possible},
                      {"resident_layers", s.resident_layers},
                      {"streamed_layers", s.streamed_layers},
                      {"staging_bytes", s.staging_bytes},
                      {"streamed_bytes_per_token", s.streamed_bytes_per_token},
                      {"seconds_per_token", s.seconds_per_token},
                      {"gpu", gpu(s.gpu)}};
  if (p.multi) {
    const auto& mg = *p.multi;
    json stages = json::array();
    for (size_t g = 0; g < mg.pipeline.size(); ++g) {
      json stage = gpu(mg.pipeline[g]);
      stage["layers"] = mg.pipeline_layers[g];
      stages.push_back(stage);
    }
    doc["multi_gpu"] = {{"gpus", mg.gpus},
                        {"tensor_parallel",
                         {{"valid", mg.tensor_parallel_valid},
                          {"fits", mg.tensor_parallel_fits},
                          {"per_gpu", gpu(mg.tensor_parallel)}}},
                        {"pipeline", {{"fits", mg.pipeline_fits}, {"stages", stages}}}};
  } else {
    doc["multi_gpu"] = nullptr;
  }
  return doc;
}

std::string render_vllm_text(const llm::LlmModel& m, const llm::VllmSizing& v,
                             const std::vector<llm::VllmQuantLevel>& levels) {
  const auto& r = v.request;
  std::string out;
  auto line = [&out](const std::string& l = {}) { out += l + "\n"; };
  const auto signed_bytes = [](int64_t b) {
    // fmt rather than "-" + string: g++ 12 warns falsely (-Wrestrict) on that
    // operator+ under LTO; 0 - b in unsigned so INT64_MIN cannot overflow.
    return b < 0 ? fmt::format("-{}", format_bytes(0 - static_cast<uint64_t>(b)))
                 : format_bytes(static_cast<uint64_t>(b));
  };
  line(fmt::format("Model       {} ({}, {})", one_line(m.source), m.format, one_line(m.architecture)));
  line(fmt::format("            {} layers, {} embd, {} heads ({} KV heads x {} dims), {} ff, {} vocab, {}", m.n_layer,
                   m.n_embd, m.n_head, m.n_head_kv, m.head_dim_k, m.n_ff, format_count(m.n_vocab), m.weight_dtype));
  line(
      fmt::format("Request     max_model_len {}, {} GPU{} x {}, gpu_memory_utilization {:.2f}, "
                  "max_num_batched_tokens {}, max_num_seqs {}, block_size {}{}",
                  format_count(r.max_model_len), r.tensor_parallel, r.tensor_parallel == 1 ? "" : "s",
                  format_bytes(r.gpu_bytes), r.gpu_memory_utilization, r.max_num_batched_tokens, r.max_num_seqs,
                  r.block_size, r.enforce_eager ? ", enforce_eager" : ""));
  line(engine_line(v.rules));
  line();
  line(fmt::format("Verdict     {}", verdict_line(v.verdict)));
  line(
      fmt::format("            the least GPU on which vLLM gives one request of {} tokens its KV blocks, at "
                  "gpu_memory_utilization {:.2f}",
                  format_count(r.max_model_len), r.gpu_memory_utilization));
  if (!v.verdict.fits()) {
    std::string fitting;
    for (const auto& q : levels)
      if (q.verdict.fits()) fitting += (fitting.empty() ? "" : ", ") + q.quant;
    if (!fitting.empty())
      line("            quantized it runs: " GPUMEM_FLAG_QUANT " " + fitting + " (a checkpoint in that format)");
  }
  line();
  line(fmt::format("Budget      {:>11}  {} x {:.2f}", format_bytes(v.budget_bytes), format_bytes(r.gpu_bytes),
                   r.gpu_memory_utilization));
  line(fmt::format("Weights     {:>11}  per GPU, with the rotary cache of {} positions", format_bytes(v.weights_bytes),
                   format_count(m.n_ctx_train)));
  line(fmt::format("Activations {:>11}  the profile run's peak ({}): {}", format_bytes(v.activation_bytes),
                   v.activation_stage, v.activation_formula));
  line(fmt::format("Non-torch   {:>11}  cuBLAS and backend buffers{}", format_bytes(v.non_torch_bytes),
                   r.tensor_parallel > 1 ? ", NCCL" : ""));
  if (v.cuda_graph_in_budget)
    line(fmt::format("CUDA graphs {:>11}  estimated, taken from the budget", format_bytes(v.cuda_graph_bytes)));
  line(fmt::format("KV cache    {:>11}  what is left: {} blocks of {} tokens ({} a block and layer)",
                   signed_bytes(v.kv_cache_bytes), format_count(v.num_gpu_blocks), r.block_size,
                   format_bytes(v.page_bytes)));
  line();
  // The line each engine prints: V0 counts blocks, V1 tokens.
  if (v.rules.vllm_v1)
    line(fmt::format("GPU KV cache size: {} tokens", format_count(v.kv_tokens)));
  else
    line(fmt::format("# GPU blocks: {} ({} tokens)", v.num_gpu_blocks, format_count(v.kv_tokens)));
  line(fmt::format("Maximum concurrency for {} tokens per request: {:.2f}x", format_count(r.max_model_len),
                   v.max_concurrency));
  if (!v.fits) {
    line(fmt::format("            vLLM refuses to start: the longest max_model_len that fits is {}",
                     format_count(v.max_model_len_that_fits)));
  }
  if (!v.cuda_graph_in_budget && v.cuda_graph_bytes > 0) {
    line(
        fmt::format("CUDA graphs {} (estimated) are captured after the KV cache, outside the budget: {} left on the "
                    "GPU after them and the CUDA context{}",
                    format_bytes(v.cuda_graph_bytes), signed_bytes(v.headroom_bytes),
                    v.headroom_bytes < 0 ? ": capture would run out of memory; lower gpu_memory_utilization or "
                                           "use " GPUMEM_FLAG_ENFORCE_EAGER
                                         : ""));
  }
  if (!levels.empty()) {
    line();
    line("Quantized   the same request, each format vLLM serves:");
    for (const auto& q : levels) {
      line(fmt::format("  {:<13} weights {:>11}  KV {:>9} tokens, {:>6.2f}x  needs {:>11}  {}", q.quant,
                       format_bytes(q.weights_bytes), format_count(q.kv_tokens), q.max_concurrency,
                       format_bytes(q.verdict.device_bytes), verdict_brief(q.verdict)));
    }
  }
  if (r.target_concurrency != 0) {
    line(fmt::format("For {} requests of {} tokens at once (" GPUMEM_FLAG_MAX_SEQS
                     " {}): gpu_memory_utilization {:.3f}{}; at {:.2f}, "
                     "max_model_len {}",
                     r.target_concurrency, format_count(r.max_model_len), r.target_concurrency,
                     v.utilization_for_target,
                     v.utilization_for_target > 1 ? " (more than the GPU: use more GPUs or a shorter context)" : "",
                     r.gpu_memory_utilization, format_count(v.max_model_len_for_target)));
  }
  return out;
}

nlohmann::ordered_json vllm_to_json(const llm::LlmModel& m, const llm::VllmSizing& v,
                                    const std::vector<llm::VllmQuantLevel>& levels) {
  const auto& r = v.request;
  json doc;
  doc["schema_version"] = kLlmSchemaVersion;
  doc["engine"] = engine_json(v.rules);
  doc["model"] = model_json(m);
  doc["request"] = {{"max_model_len", r.max_model_len},
                    {"gpu_bytes", r.gpu_bytes},
                    {"gpus", r.tensor_parallel},
                    {"gpu_memory_utilization", r.gpu_memory_utilization},
                    {"max_num_batched_tokens", r.max_num_batched_tokens},
                    {"max_num_seqs", r.max_num_seqs},
                    {"block_size", r.block_size},
                    {"enforce_eager", r.enforce_eager},
                    {"target_concurrency", r.target_concurrency}};
  doc["fits"] = v.verdict.fits();
  doc["verdict"] = verdict_json(v.verdict);
  json quant_levels = json::array();
  for (const auto& q : levels) {
    quant_levels.push_back({{"quant", q.quant},
                            {"weights_bytes", q.weights_bytes},
                            {"kv_tokens", q.kv_tokens},
                            {"max_concurrency", q.max_concurrency},
                            {"verdict", verdict_json(q.verdict)}});
  }
  doc["quant_levels"] = quant_levels;
  doc["budget_bytes"] = v.budget_bytes;
  doc["weights_bytes"] = v.weights_bytes;
  doc["activation_bytes"] = v.activation_bytes;
  doc["activation"] = {{"stage", v.activation_stage}, {"formula", v.activation_formula}};
  doc["non_torch_bytes"] = v.non_torch_bytes;
  doc["cuda_graph_bytes"] = v.cuda_graph_bytes;
  doc["cuda_graph_in_budget"] = v.cuda_graph_in_budget;
  doc["kv_cache_bytes"] = v.kv_cache_bytes;
  doc["page_bytes"] = v.page_bytes;
  doc["num_gpu_blocks"] = v.num_gpu_blocks;
  doc["kv_tokens"] = v.kv_tokens;
  doc["layer_blocks_per_request"] = v.blocks_per_request;
  doc["max_concurrency"] = v.max_concurrency;
  doc["max_model_len_that_fits"] = v.max_model_len_that_fits;
  doc["headroom_bytes"] = v.headroom_bytes;
  doc["utilization_for_target"] = r.target_concurrency ? json(v.utilization_for_target) : json(nullptr);
  doc["max_model_len_for_target"] = r.target_concurrency ? json(v.max_model_len_for_target) : json(nullptr);
  return doc;
}

}  // namespace gpumem
