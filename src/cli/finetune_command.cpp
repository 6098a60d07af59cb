#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/output_files.h"
#include "cli/size_flag.h"
#include "cli/step_flags.h"
#include "cli/streams.h"
#include "common/bounded_json.h"
#include "gpumem/common/error.h"
#include "gpumem/finetune/finetune_fit.h"
#include "gpumem/llm/llm_model.h"
#include "gpumem/report/finetune_report.h"
#include "gpumem/report/html/train_page.h"

namespace gpumem::cli {

Action add_finetune_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "finetune",
      "A language model's fine-tuning step (full, freeze, LoRA, QLoRA) from its config: peak and what fits");
  struct Args {
    std::string model, method = "lora", quant = "nf4", checkpointing = "none", attention = "sdpa", gpu, trace_out,
                       strategy = "ddp", html;
    int gpus = 1;
    bool offload = false;
    std::vector<std::string> targets;
    StepFlags step_flags;
    uint32_t lora_r = 16, freeze_layers = 1;
    double lora_dropout = 0;
    uint64_t seq = 2048, micro_batch = 1, grad_accum = 1;
    bool max_seq = false, max_batch = false, json = false, shift_copy = false;
    int top = 10;
  };
  auto args = std::make_shared<Args>();
  args->step_flags.precision = "bf16";
  cmd->add_option("MODEL", args->model, "A Hugging Face config.json or folder, or a .gguf file (what gpumem llm reads)")
      ->required();
  cmd->add_option("--method", args->method, "full | freeze | lora | qlora (default lora)")
      ->check(CLI::IsMember({"full", "freeze", "lora", "qlora"}));
  cmd->add_option("--lora-r", args->lora_r, "LoRA rank (default 16)")->check(kPositiveInteger);
  add_list_option(*cmd, "--lora-targets", args->targets,
                  "Layers with adapters: q, k, v, o, gate, up, down, head (lm_head), embed (the token embeddings) "
                  "(default the seven linear layers of each block)",
                  "NAME");
  cmd->add_option("--lora-dropout", args->lora_dropout, "LoRA dropout probability (default 0: no mask kept)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--quant", args->quant, "qlora: the frozen base weights' format: nf4 | nf4-dq | int8 (default nf4)")
      ->check(CLI::IsMember({"nf4", "nf4-dq", "int8"}));
  cmd->add_option("--freeze-layers", args->freeze_layers,
                  "freeze: how many of the last layers train, with the final norm and the head (default 1)")
      ->check(kPositiveInteger);
  add_step_flags(*cmd, args->step_flags);
  add_context_option(*cmd, args->seq, "Tokens per sequence (default 2048)");
  cmd->add_option("--batch", args->micro_batch, "Sequences per forward, per GPU: the micro-batch (default 1)")
      ->check(kPositiveInteger);
  add_renamed_flag(*cmd, "--micro-batch", "--batch", args->micro_batch, kPositiveInteger);
  cmd->add_option("--grad-accum", args->grad_accum,
                  "Micro-batches per optimizer step (memory is one micro-batch's; the report says the effective batch)")
      ->check(kPositiveInteger);
  cmd->add_option("--checkpoint", args->checkpointing,
                  "none | layers: every decoder layer under torch.utils.checkpoint (default none)")
      ->check(CLI::IsMember({"none", "layers"}));
  add_renamed_flag(*cmd, "--checkpointing", "--checkpoint", args->checkpointing);
  cmd->add_option("--attention", args->attention,
                  "eager (the [b, heads, s, s] scores) | sdpa | flash (fused: O(s)) (default sdpa)")
      ->check(CLI::IsMember({"eager", "sdpa", "flash"}));
  cmd->add_flag("--shift-copy", args->shift_copy,
                "The loss copies the shifted logits, as transformers before 4.46 does (default: the newer padding)");
  add_gpu_memory_option(*cmd, args->gpu, "Memory of one GPU, e.g. 24GiB: whether it fits, and what would");
  cmd->add_option("--gpus", args->gpus, "GPUs in data parallel; --batch is per GPU (default 1)")
      ->check(kPositiveInteger);
  cmd->add_option("--strategy", args->strategy,
                  "With --gpus: ddp | zero1 | zero2 | zero3 (DeepSpeed) | fsdp (FULL_SHARD) (default ddp)")
      ->check(CLI::IsMember({"ddp", "zero1", "zero2", "zero3", "fsdp"}));
  cmd->add_flag("--offload", args->offload, "With --strategy zero*: the optimizer states in CPU memory");
  cmd->add_flag("--max-context", args->max_seq, "With --gpu: the longest --context that fits");
  add_renamed_switch(*cmd, "--max-seq", "--max-context", args->max_seq);
  cmd->add_flag("--max-batch", args->max_batch, "With --gpu: the largest --batch that fits");
  cmd->add_option("--top", args->top, "How many of the largest tensors at the peak to list")
      ->check(kNonNegativeInteger);
  cmd->add_flag("--json", args->json, "Print one JSON document (schema in docs/finetune.md)");
  add_html_flag(*cmd, args->html);
  cmd->add_option("--trace", args->trace_out, "Write the predicted step as a gpumem trace (gpumem replay reads it)")
      ->type_name("FILE");

  return [args, cmd]() {
    // Each method's own flags, refused under the others.
    const bool lora = args->method == "lora" || args->method == "qlora";
    if (!lora)
      refuse_flags(*cmd, {"--lora-r", "--lora-targets", "--lora-dropout"}, "to --method " + args->method,
                   "they shape LoRA's adapters (--method lora or qlora)");
    if (args->method != "qlora")
      refuse_flags(*cmd, {"--quant"}, "to --method " + args->method,
                   "it is the frozen base's 4-bit or 8-bit format under --method qlora");
    if (args->method != "freeze")
      refuse_flags(*cmd, {"--freeze-layers"}, "to --method " + args->method,
                   "it counts the layers that train under --method freeze");
    if (args->gpus < 2) refuse_flags(*cmd, {"--strategy"}, "on one GPU", "give --gpus N (N > 1) with it");
    static const std::map<std::string, finetune::FinetuneMethod> methods = {
        {"full", finetune::FinetuneMethod::kFull},
        {"freeze", finetune::FinetuneMethod::kFreeze},
        {"lora", finetune::FinetuneMethod::kLora},
        {"qlora", finetune::FinetuneMethod::kQlora}};
    static const std::map<std::string, finetune::BaseQuant> quants = {{"nf4", finetune::BaseQuant::kNf4},
                                                                      {"nf4-dq", finetune::BaseQuant::kNf4DoubleQuant},
                                                                      {"int8", finetune::BaseQuant::kInt8}};
    static const std::map<std::string, finetune::Attention> attentions = {{"eager", finetune::Attention::kEager},
                                                                          {"sdpa", finetune::Attention::kSdpa},
                                                                          {"flash", finetune::Attention::kFlash}};
    finetune::FinetuneOptions o;
    o.method = methods.at(args->method);
    o.lora_r = args->lora_r;
    if (!args->targets.empty()) o.lora_targets = args->targets;
    o.lora_dropout = args->lora_dropout;
    o.quant = quants.at(args->quant);
    o.freeze_trainable_layers = args->freeze_layers;
    apply_step_flags(args->step_flags, o.train);
    o.seq = args->seq;
    o.micro_batch = args->micro_batch;
    o.grad_accum = args->grad_accum;
    if (args->checkpointing != "none" && args->checkpointing != "layers")
      throw InputError("--checkpoint: '" + args->checkpointing + "' is not none or layers");
    o.checkpointing = args->checkpointing == "layers";
    o.attention = attentions.at(args->attention);
    o.shift_copy = args->shift_copy;
    if ((args->max_seq || args->max_batch) && args->gpu.empty())
      throw InputError(std::string(args->max_seq ? "--max-context" : "--max-batch") + " needs --gpu SIZE");
    const uint64_t gpu = args->gpu.empty() ? 0 : parse_memory_flag("--gpu", args->gpu);
    const llm::LlmModel model = llm::load_llm_model(args->model);
    static const std::map<std::string, finetune::Strategy> strategies = {{"ddp", finetune::Strategy::kDdp},
                                                                         {"zero1", finetune::Strategy::kZero1},
                                                                         {"zero2", finetune::Strategy::kZero2},
                                                                         {"zero3", finetune::Strategy::kZero3},
                                                                         {"fsdp", finetune::Strategy::kFsdp}};
    finetune::FinetuneParallel parallel;
    parallel.gpus = args->gpus;
    parallel.strategy = strategies.at(args->strategy);
    parallel.offload = args->offload;
    if (args->offload && args->strategy.rfind("zero", 0) != 0)
      throw InputError("--offload: only with --strategy zero1, zero2 or zero3 (DeepSpeed's offload_optimizer)");
    const finetune::FinetunePlan plan =
        finetune::plan_finetune(model, o, gpu, args->max_seq, args->max_batch, parallel);
    if (!args->trace_out.empty()) write_step_trace(args->trace_out, plan.step.step);
    if (!args->html.empty()) write_html(args->html, report::train_html(plan.step.step, report::finetune_summary(plan)));
    if (args->json) {
      std::fputs((json_text(finetune_to_json(plan, args->top), 2) + "\n").c_str(), out());
    } else {
      std::fputs(render_finetune_text(plan, args->top).c_str(), out());
    }
    return gpu != 0 && !plan.verdict.fits() ? kExitDoesNotFit : kExitOk;
  };
}

}  // namespace gpumem::cli
