#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/size_flag.h"
#include "gpumem/common/error.h"
#include "gpumem/common/units.h"
#include "gpumem/report/llm_report.h"

namespace gpumem::cli {

Action add_llm_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "llm", "Whether a language model fits a GPU at a context: weights, KV cache, activations, offload, split");
  struct Args {
    std::string model, gpu, overhead, pcie = "25GB", quant, kv_dtype = "f16", flash_attn = "on";
    uint64_t context = 0, batch = 1, ubatch = 512;
    uint32_t gpus = 1;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("MODEL", args->model,
                  "A .gguf file, a Hugging Face folder (config.json and *.safetensors) or a config.json")
      ->required();
  cmd->add_option("--context", args->context, "Tokens cached per sequence (default: the model's training context)")
      ->check(kPositiveInteger);
  cmd->add_option("--batch", args->batch, "Sequences served at once, each with --context tokens")
      ->check(kPositiveInteger);
  cmd->add_option("--ubatch", args->ubatch, "Tokens one forward processes (llama.cpp's n_ubatch)")
      ->check(kPositiveInteger);
  add_gpu_memory_option(*cmd, args->gpu, "Memory of one GPU, e.g. 24GiB (required)");
  cmd->add_option("--gpus", args->gpus, "GPUs to split the model over (tensor and pipeline parallel)")
      ->check(kPositiveInteger);
  cmd->add_option("--quant", args->quant,
                  "Price the weights as gpumem quantize --type would write them (q4_k_m, q8_0, q6_k, f16...)");
  cmd->add_option("--kv-dtype", args->kv_dtype,
                  "KV cache element type: f16, bf16, f32, q8_0, q4_0, fp8; K,V apart as q8_0,f16");
  cmd->add_option("--flash-attn", args->flash_attn, "on (llama.cpp's choice on current GPUs) or off")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--overhead", args->overhead, "CUDA context and runtime memory (default 512MiB)")->type_name("SIZE");
  cmd->add_option("--pcie", args->pcie, "Host-to-GPU bandwidth per second for the streaming plan (default 25GB)");
  cmd->add_flag("--json", args->json, "Print one JSON document (schema in docs/llm.md)");
  return [args]() {
    llm::LlmRequest r;
    r.context = args->context;
    r.batch = args->batch;
    r.ubatch = args->ubatch;
    require_flag("--gpu", args->gpu, "the memory of one GPU, e.g. 24GiB");
    r.gpu_bytes = parse_memory_flag("--gpu", args->gpu);
    r.gpus = args->gpus;
    r.quant = args->quant;
    r.kv_dtype = args->kv_dtype;
    r.flash_attention = args->flash_attn == "on";
    if (!args->overhead.empty()) r.overhead_bytes = parse_memory_flag("--overhead", args->overhead, true);
    const auto pcie = parse_bytes(args->pcie);
    if (!pcie || *pcie == 0)
      throw InputError("--pcie: '" + args->pcie + "' is not a byte count per second, e.g. 25GB or 12GiB");
    r.pcie_bytes_per_second = static_cast<double>(*pcie);
    const llm::LlmPlan plan = llm::plan_llm(llm::load_llm_model(args->model), r);
    if (args->json) {
      std::fputs((llm_to_json(plan).dump(2) + "\n").c_str(), stdout);
    } else {
      std::fputs(render_llm_text(plan).c_str(), stdout);
    }
    return plan.fits ? kExitOk : kExitDoesNotFit;
  };
}

}  // namespace gpumem::cli
