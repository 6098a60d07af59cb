#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/output_files.h"
#include "cli/size_flag.h"
#include "cli/streams.h"
#include "common/bounded_json.h"
#include "gpumem/common/error.h"
#include "gpumem/common/units.h"
#include "gpumem/llm/vllm_quant.h"
#include "gpumem/report/html/command_pages.h"
#include "gpumem/report/html/train_page.h"
#include "gpumem/report/llm_report.h"
#include "gpumem/weights/quantize_file.h"

namespace gpumem::cli {

namespace {

// What --quant takes under an engine, and where the other names belong.
std::string quant_names(llm::EngineKind kind) {
  std::string ggml, vllm;
  for (const auto& r : weights::quantize_recipes()) ggml += (ggml.empty() ? "" : ", ") + std::string(r.name);
  for (const auto& f : llm::vllm_quant_formats()) vllm += (vllm.empty() ? "" : ", ") + std::string(f.name);
  if (kind == llm::EngineKind::kVllm)
    return "under --engine vllm, --quant is a quantized checkpoint vLLM serves: " + vllm +
           " (llama.cpp's GGUF types are for --engine llama.cpp or ollama)";
  return "under llama.cpp and ollama, --quant is a GGUF type: " + ggml + " (" + vllm + " are vLLM's: --engine vllm)";
}

}  // namespace

Action add_llm_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "llm", "Whether a language model fits a GPU at a context: weights, KV cache, activations, offload, split");
  struct Args {
    std::string model, gpu, overhead, pcie = "25GB", quant, kv_dtype = "f16", flash_attn = "on";
    uint64_t context = 0, batch = 1, ubatch = 512;
    uint32_t gpus = 1;
    bool json = false;
    std::string html;
    std::string engine = "llama.cpp";
    // vLLM's own settings, under their vLLM names.
    double gpu_memory_utilization = 0.9;
    uint64_t max_num_batched_tokens = 0, max_num_seqs = 0, concurrency = 0;
    uint32_t block_size = 16;
    bool enforce_eager = false;
    std::string non_torch;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("MODEL", args->model,
                  "A .gguf file, a Hugging Face folder (config.json and *.safetensors) or a config.json")
      ->required();
  add_context_option(*cmd, args->context, "Tokens cached per sequence (default: the model's training context)");
  cmd->add_option("--batch", args->batch, "Sequences served at once, each with --context tokens")
      ->check(kPositiveInteger);
  cmd->add_option("--ubatch", args->ubatch, "Tokens one forward processes (llama.cpp's n_ubatch)")
      ->check(kPositiveInteger);
  add_gpu_memory_option(*cmd, args->gpu, "Memory of one GPU, e.g. 24GiB (required)");
  cmd->add_option("--gpus", args->gpus, "GPUs to split the model over (tensor and pipeline parallel)")
      ->check(kPositiveInteger);
  cmd->add_option("--quant", args->quant,
                  "Price the weights quantized: a GGUF type as gpumem quantize --type writes it (q4_k_m, q8_0, "
                  "q6_k, f16...) under llama.cpp and ollama; awq, gptq, fp8 or bitsandbytes under vllm");
  cmd->add_option("--kv-dtype", args->kv_dtype,
                  "KV cache element type: f16, bf16, f32, q8_0, q4_0, fp8; K,V apart as q8_0,f16");
  cmd->add_option("--flash-attn", args->flash_attn, "on (llama.cpp's choice on current GPUs) or off")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--overhead", args->overhead, "CUDA context and runtime memory (default 512MiB)")->type_name("SIZE");
  cmd->add_option("--pcie", args->pcie, "Host-to-GPU bandwidth per second for the streaming plan (default 25GB)");
  add_engine_options(*cmd, args->engine, args->gpu_memory_utilization);
  cmd->add_option(
         "--token-budget", args->max_num_batched_tokens,
         "vllm: tokens of one forward, vLLM's max_num_batched_tokens (default: vLLM's for the version and GPU)")
      ->check(kPositiveInteger);
  cmd->add_option("--max-seqs", args->max_num_seqs, "vllm: sequences at once, vLLM's max_num_seqs (default: vLLM's)")
      ->check(kPositiveInteger);
  cmd->add_option("--block-tokens", args->block_size, "vllm: tokens per KV block, vLLM's block_size (default 16)")
      ->check(kPositiveInteger);
  cmd->add_flag("--enforce-eager", args->enforce_eager, "vllm: no CUDA graphs");
  cmd->add_option("--non-torch", args->non_torch,
                  "vllm: memory outside PyTorch, as vLLM's log printed it on this machine (default 200MiB, "
                  "500MiB over several GPUs)")
      ->type_name("SIZE");
  cmd->add_option("--concurrency", args->concurrency,
                  "vllm: requests of --context tokens to serve at once; answers the utilization and context that fit")
      ->check(kPositiveInteger);
  cmd->add_flag("--json", args->json, "Print one JSON document (schema in docs/llm.md)");
  add_html_flag(*cmd, args->html);
  return [args, cmd]() {
    const llm::EngineRules engine = llm::engine_rules(args->engine);
    // A flag of one engine is refused under another, never ignored.
    if (engine.kind == llm::EngineKind::kVllm) {
      refuse_flags(*cmd, {"--batch"}, "under --engine vllm",
                   "vLLM serves as many sequences as fit: --concurrency N asks whether N requests of --context tokens "
                   "fit, --max-seqs caps them");
      refuse_flags(*cmd, {"--ubatch"}, "under --engine vllm", "one forward's tokens are --token-budget");
      refuse_flags(*cmd, {"--overhead"}, "under --engine vllm", "memory outside PyTorch is --non-torch");
      refuse_flags(*cmd, {"--flash-attn", "--pcie"}, "under --engine vllm",
                   "they are llama.cpp's; vLLM neither chooses its attention kernel by flag nor offloads layers");
      if (args->kv_dtype != "f16" && args->kv_dtype != "bf16" && args->kv_dtype != "auto" && args->kv_dtype != "fp8" &&
          args->kv_dtype != "fp8_e4m3" && args->kv_dtype != "fp8_e5m2") {
        throw InputError("--kv-dtype " + args->kv_dtype +
                         ": under --engine vllm the KV cache is auto (the model's type, f16 or bf16) or fp8, "
                         "fp8_e4m3, fp8_e5m2 (vLLM's --kv-cache-dtype)");
      }
      require_flag("--gpu", args->gpu, "the memory of one GPU, e.g. 80GiB");
      llm::VllmRequest v;
      v.gpu_bytes = parse_memory_flag("--gpu", args->gpu);
      v.tensor_parallel = args->gpus;
      v.gpu_memory_utilization = args->gpu_memory_utilization;
      v.max_model_len = args->context;
      v.max_num_batched_tokens = args->max_num_batched_tokens;
      v.max_num_seqs = args->max_num_seqs;
      v.block_size = args->block_size;
      v.enforce_eager = args->enforce_eager;
      v.target_concurrency = args->concurrency;
      if (!args->non_torch.empty()) v.non_torch_bytes = parse_memory_flag("--non-torch", args->non_torch, true);
      if (args->kv_dtype.rfind("fp8", 0) == 0) v.kv_bytes_per_value = 1;
      llm::LlmModel model = llm::load_llm_model(args->model);
      // Without --quant, every format vLLM serves at the same request; with
      // it, the model in that format.
      std::vector<llm::VllmQuantLevel> levels;
      if (args->quant.empty()) {
        levels = llm::vllm_quant_levels(model, v, engine);
      } else {
        const llm::VllmQuantFormat* format = llm::vllm_quant_named(args->quant);
        if (format == nullptr) throw InputError("--quant " + args->quant + ": " + quant_names(llm::EngineKind::kVllm));
        model = llm::vllm_quantized(std::move(model), *format);
      }
      const llm::VllmSizing sizing = llm::size_vllm(model, v, engine);
      if (!args->html.empty()) write_html(args->html, report::vllm_html(model, sizing, levels));
      if (args->json) {
        std::fputs((json_text(vllm_to_json(model, sizing, levels), 2) + "\n").c_str(), out());
      } else {
        std::fputs(render_vllm_text(model, sizing, levels).c_str(), out());
      }
      return sizing.verdict.fits() ? kExitOk : kExitDoesNotFit;
    }
    refuse_flags(*cmd,
                 {"--gpu-memory-utilization", "--token-budget", "--max-seqs", "--block-tokens", "--enforce-eager",
                  "--non-torch", "--concurrency"},
                 "under --engine " + args->engine,
                 "it is vLLM's (--engine vllm); llama.cpp and ollama serve --batch sequences of --context tokens");
    llm::LlmRequest r;
    r.context = args->context;
    r.batch = args->batch;
    r.ubatch = args->ubatch;
    require_flag("--gpu", args->gpu, "the memory of one GPU, e.g. 24GiB");
    r.gpu_bytes = parse_memory_flag("--gpu", args->gpu);
    r.gpus = args->gpus;
    if (!args->quant.empty() && weights::quantize_recipe_named(args->quant) == nullptr)
      throw InputError("--quant " + args->quant + ": " + quant_names(engine.kind));
    r.quant = args->quant;
    r.kv_dtype = args->kv_dtype;
    r.flash_attention = args->flash_attn == "on";
    if (!args->overhead.empty()) r.overhead_bytes = parse_memory_flag("--overhead", args->overhead, true);
    const auto pcie = parse_bytes(args->pcie);
    if (!pcie || *pcie == 0)
      throw InputError("--pcie: '" + args->pcie + "' is not a byte count per second, e.g. 25GB or 12GiB");
    r.pcie_bytes_per_second = static_cast<double>(*pcie);
    r.engine = engine;
    const llm::LlmPlan plan = llm::plan_llm(llm::load_llm_model(args->model), r);
    if (!args->html.empty()) write_html(args->html, report::llm_html(plan));
    if (args->json) {
      std::fputs((json_text(llm_to_json(plan), 2) + "\n").c_str(), out());
    } else {
      std::fputs(render_llm_text(plan).c_str(), out());
    }
    return plan.verdict.fits() ? kExitOk : kExitDoesNotFit;
  };
}

}  // namespace gpumem::cli
