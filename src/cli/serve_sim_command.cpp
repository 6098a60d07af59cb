#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/output_files.h"
#include "cli/size_flag.h"
#include "cli/streams.h"
#include "common/bounded_json.h"
#include "gpumem/common/error.h"
#include "gpumem/common/files.h"
#include "gpumem/common/units.h"
#include "gpumem/llm/engines.h"
#include "gpumem/llm/llm_model.h"
#include "gpumem/llm/serve_setup.h"
#include "gpumem/llm/vllm_sizing.h"
#include "gpumem/report/html/command_pages.h"
#include "gpumem/report/serve_report.h"
#include "gpumem/serve/request_trace.h"
#include "gpumem/serve/trace_generator.h"

namespace gpumem::cli {
namespace {

serve::Policy parse_policy(const std::string& name) {
  for (serve::Policy p : {serve::Policy::kContiguous, serve::Policy::kVllm, serve::Policy::kGpumem})
    if (name == serve::policy_name(p)) return p;
  throw InputError("--policy: unknown policy '" + printable(name) + "' (policies: contiguous, vllm, gpumem)");
}

double positive_rate(const std::string& flag, const std::string& text, bool bytes, bool allow_zero = false) {
  if (bytes) {
    const auto b = parse_bytes(text);
    if (!b || *b == 0) throw InputError(flag + ": '" + printable(text) + "' is not a byte count per second, e.g. 3TB");
    return static_cast<double>(*b);
  }
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size() && std::isfinite(v) && (v > 0 || (allow_zero && v == 0))) return v;
  } catch (const std::exception&) {
  }
  throw InputError(flag + ": '" + printable(text) + "' is not a " + (allow_zero ? "non-negative" : "positive") +
                   " number");
}

}  // namespace

Action add_serve_sim_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "serve-sim", "Serve a request trace under each KV-cache policy in simulated time: utilisation, waste, latency");
  struct Args {
    std::string model, gpu, requests, overhead, quant, kv_dtype = "f16", engine = "llama.cpp";
    double gpu_memory_utilization = 0.9;
    std::vector<std::string> policies;
    uint64_t max_model_len = 4096;
    uint32_t block_tokens = 16, token_budget = 2048, max_seqs = 256;
    bool no_prefix_cache = false, json = false;
    std::string flops = "494.5e12", bandwidth = "2.68TB", step_overhead = "0.0005";
    std::string generate, output, html;
    uint64_t seed = 1, count = 0;
    double rate = 0;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("MODEL", args->model, "A .gguf file, a Hugging Face folder or a config.json (what gpumem llm takes)");
  add_renamed_flag(*cmd, "--model", "the positional MODEL", args->model);
  add_gpu_memory_option(*cmd, args->gpu, "Memory of the GPU, e.g. 80GiB");
  cmd->add_option("--requests", args->requests,
                  "Request trace: CSV arrival_s,prompt_tokens,output_tokens[,prefix_group[,prefix_tokens]] or JSON "
                  "lines, gzip or not");
  add_list_option(*cmd, "--policy", args->policies, "Policies to compare (default: contiguous,vllm,gpumem)", "POLICY");
  add_context_option(*cmd, args->max_model_len, "Longest prompt + output a request may have (vLLM's max_model_len)");
  cmd->add_option("--block-tokens", args->block_tokens, "Tokens per KV block (paged policies)")
      ->check(kPositiveInteger);
  cmd->add_option("--token-budget", args->token_budget, "Tokens per step; prefills are chunked to fit")
      ->check(kPositiveInteger);
  cmd->add_option("--max-seqs", args->max_seqs, "Running sequences per step")->check(kPositiveInteger);
  cmd->add_flag("--no-prefix-cache", args->no_prefix_cache, "Turn the paged policies' prefix cache off");
  cmd->add_option("--quant", args->quant, "Price the weights as gpumem quantize --type would write them");
  add_engine_options(*cmd, args->engine, args->gpu_memory_utilization);
  cmd->add_option("--kv-dtype", args->kv_dtype, "KV cache element type: f16, bf16, f32, q8_0, q4_0, fp8");
  cmd->add_option("--overhead", args->overhead, "CUDA context and runtime memory (default 512MiB)")->type_name("SIZE");
  cmd->add_option("--flops", args->flops, "Effective FLOP/s of the GPU (default 494.5e12: half an H100's BF16)");
  cmd->add_option("--bandwidth", args->bandwidth,
                  "Effective memory bandwidth per second (default 2.68TB: 80% of an H100's 3.35TB)");
  cmd->add_option("--step-overhead", args->step_overhead, "Seconds every step costs besides compute and memory");
  cmd->add_flag("--json", args->json, "Print one JSON document (schema in docs/serve.md)");
  add_html_flag(*cmd, args->html);
  cmd->add_option("--generate", args->generate,
                  "Write a generated trace instead of simulating: sharegpt, alpaca, system-prompt, bursty");
  add_output_option(*cmd, args->output, "With --generate: the CSV file to write (default: stdout)");
  cmd->add_option("--seed", args->seed, "With --generate: the random seed (default 1)");
  cmd->add_option("--count", args->count, "With --generate: requests (default 1000)")->check(kPositiveInteger);
  cmd->add_option("--rate", args->rate, "With --generate: arrivals per second (default: the preset's)")
      ->check(CLI::PositiveNumber);
  return [args, cmd]() {
    // Each flag belongs to one of the two jobs, and to one engine's rules:
    // given to the other, it is refused rather than ignored.
    if (!args->generate.empty()) {
      refuse_flags(*cmd,
                   {"MODEL", "--gpu", "--requests", "--policy", "--block-tokens", "--token-budget", "--max-seqs",
                    "--no-prefix-cache", "--quant", "--engine", "--gpu-memory-utilization", "--kv-dtype", "--overhead",
                    "--flops", "--bandwidth", "--step-overhead", "--json", "--html"},
                   "with --generate", "it writes a request trace; simulate it in a second run with --requests");
    } else {
      refuse_flags(*cmd, {"--output", "--seed", "--count", "--rate"}, "without --generate",
                   "they shape a generated trace (--generate PRESET)");
    }
    const llm::EngineRules engine = llm::engine_rules(args->engine);
    if (engine.kind == llm::EngineKind::kVllm) {
      refuse_flags(*cmd, {"--overhead"}, "under --engine vllm", "vLLM's budget is --gpu-memory-utilization");
      refuse_flags(*cmd, {"--quant"}, "under --engine vllm", "vLLM sizes the checkpoint as given");
    } else {
      refuse_flags(*cmd, {"--gpu-memory-utilization"}, "under --engine " + args->engine, "it is vLLM's");
    }
    if (!args->generate.empty()) {
      serve::TraceShape shape = serve::trace_preset(args->generate);
      shape.seed = args->seed;
      shape.max_model_len = static_cast<uint32_t>(args->max_model_len);  // < 2^32: kTokenCount
      if (args->count) shape.requests = args->count;
      if (args->rate > 0) shape.rate_per_s = args->rate;
      const std::string csv = serve::request_trace_csv(serve::generate_trace(shape));
      if (args->output.empty()) {
        std::fputs(csv.c_str(), out());
      } else {
        write_output(args->output, csv, "request trace CSV");
      }
      return kExitOk;
    }
    if (args->model.empty()) throw InputError("serve-sim: give the MODEL (or --generate PRESET)");
    require_flag("--gpu", args->gpu, "the memory of the GPU, e.g. 80GiB");
    if (args->requests.empty())
      throw InputError("serve-sim: give --requests FILE (gpumem serve-sim --generate makes one)");
    std::vector<serve::Policy> policies;
    for (const auto& p : args->policies) policies.push_back(parse_policy(p));
    if (policies.empty()) policies = {serve::Policy::kContiguous, serve::Policy::kVllm, serve::Policy::kGpumem};

    llm::LlmRequest r;
    r.gpu_bytes = parse_memory_flag("--gpu", args->gpu);
    r.quant = args->quant;
    r.kv_dtype = args->kv_dtype;
    if (!args->overhead.empty()) r.overhead_bytes = parse_memory_flag("--overhead", args->overhead, true);
    serve::SchedulerConfig config;
    config.block_tokens = args->block_tokens;
    config.max_model_len = static_cast<uint32_t>(args->max_model_len);
    config.token_budget = args->token_budget;
    config.max_sequences = args->max_seqs;
    config.prefix_caching = !args->no_prefix_cache;
    serve::TimeModel time;
    time.flops_per_s = positive_rate("--flops", args->flops, false);
    time.bytes_per_s = positive_rate("--bandwidth", args->bandwidth, true);
    time.step_overhead_s = positive_rate("--step-overhead", args->step_overhead, false, true);

    const auto requests = serve::read_request_trace(args->requests, config.max_model_len);
    r.engine = engine;
    const llm::LlmModel model = llm::load_llm_model(args->model);
    std::optional<llm::VllmSizing> vllm;
    if (r.engine.kind == llm::EngineKind::kVllm) {
      // The pool vLLM itself would make for these settings.
      llm::VllmRequest v;
      v.gpu_bytes = r.gpu_bytes;
      v.gpu_memory_utilization = args->gpu_memory_utilization;
      v.max_model_len = config.max_model_len;
      v.max_num_batched_tokens = config.token_budget;
      v.max_num_seqs = config.max_sequences;
      v.block_size = config.block_tokens;
      if (args->kv_dtype.rfind("fp8", 0) == 0) v.kv_bytes_per_value = 1;
      vllm = llm::size_vllm(model, v, r.engine);
    }
    const serve::ServeSetup setup = llm::serve_setup(model, r, config, time, vllm ? &*vllm : nullptr);
    const serve::ServeSimulation sim = serve::simulate_all(setup, policies, requests);
    if (!args->html.empty()) write_html(args->html, report::serve_html(sim));
    if (args->json) {
      std::fputs((json_text(serve_to_json(sim), 2) + "\n").c_str(), out());
    } else {
      std::fputs(render_serve_text(sim).c_str(), out());
    }
    return kExitOk;
  };
}

}  // namespace gpumem::cli
