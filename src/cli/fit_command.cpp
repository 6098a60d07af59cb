#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/model_flags.h"
#include "cli/output_files.h"
#include "cli/size_flag.h"
#include "cli/step_flags.h"
#include "cli/streams.h"
#include "common/bounded_json.h"
#include "gpumem/common/error.h"
#include "gpumem/common/files.h"
#include "gpumem/report/fit_report.h"
#include "gpumem/report/html/train_page.h"

namespace gpumem::cli {

Action add_fit_command(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("fit", "Make a training step fit a budget: cheapest changes, checkpointing, largest batch");
  struct Args {
    std::string model, gpu, emit, output_dir = ".", trace_out, html, loss = "cross-entropy";
    std::vector<std::string> keep;
    StepFlags step_flags;
    ModelFlags flags;
    bool max_batch = false, json = false, offload = false;
    int gpus = 1;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("MODEL", args->model, "ONNX model exported in training mode")->required();
  add_gpu_memory_option(*cmd, args->gpu,
                        "Memory of one GPU (e.g. 24GiB): the least memory the step runs in under --allocator, "
                        "--overhead included, must fit it (required)");
  add_shape_flags(*cmd, args->flags);
  cmd->add_flag("--max-batch", args->max_batch,
                "Find the largest batch (the batch axis, as --batch binds it) that fits");
  add_step_flags(*cmd, args->step_flags, /*precision_auto=*/true);
  add_loss_flag(*cmd, args->loss);
  add_list_option(*cmd, "--keep", args->keep,
                  "Levers fit must not pull: optimizer (foreach, set_to_none, 8-bit states), precision, checkpoint, "
                  "batch (micro-batches with gradient accumulation), offload (states in CPU memory)",
                  "LEVER");
  cmd->add_option("--gpus", args->gpus,
                  "GPUs to spread the step over: memory per GPU under DeepSpeed ZeRO, FSDP and "
                  "pipeline stages")
      ->check(kPositiveInteger);
  cmd->add_flag("--offload", args->offload,
                "One GPU: let fit move optimizer states and parameters to CPU memory (DeepSpeed ZeRO-Offload); "
                "never tried otherwise on one GPU");
  cmd->add_option("--emit", args->emit,
                  "checkpoint (checkpoint.py: apply(model)), deepspeed (ds_config.json) or fsdp (fsdp_wrap.py), into "
                  "--output-dir")
      ->check(CLI::IsMember({"checkpoint", "deepspeed", "fsdp"}));
  cmd->add_option("--output-dir", args->output_dir, "Directory for --emit (default: .)")->type_name("DIR");
  for (const char* old_name : {"-o", "--out"}) add_renamed_flag(*cmd, old_name, "--output-dir", args->output_dir);
  cmd->add_flag("--json", args->json, "Print one JSON document (schema in docs/fit.md)");
  add_html_flag(*cmd, args->html);
  cmd->add_option("--trace", args->trace_out,
                  "Write the chosen step, changes applied, as a gpumem trace (gpumem replay reads it)")
      ->type_name("FILE");

  return [args, cmd]() {
    train::FitRequest request;
    request.options.model = to_inspect_options(args->flags);
    apply_step_flags(args->step_flags, request.options);
    request.options.loss = loss_named(args->loss);
    for (const auto& name : args->keep) {
      const auto lever = train::parse_lever(name);
      if (!lever)
        throw InputError("--keep " + name +
                         ": unknown lever (known: optimizer, precision, checkpoint, batch, offload)");
      request.keep.insert(*lever);
    }
    request.max_batch = args->max_batch;
    require_flag("--gpu", args->gpu, "the memory of one GPU, e.g. 24GiB");
    request.budget = parse_memory_flag("--gpu", args->gpu);
    request.gpus = args->gpus;
    request.offload = args->offload;
    if (args->offload && request.keep.count(train::Lever::kOffload))
      throw InputError("fit: --offload asks for the lever --keep offload forbids; give one of them");
    if ((args->emit == "deepspeed" || args->emit == "fsdp") && args->gpus < 2) {
      throw InputError("fit: --emit " + args->emit + " needs --gpus N (N > 1)");
    }
    if (args->max_batch && args->flags.batch) throw InputError("fit: give --batch N or --max-batch, not both");
    if (args->emit.empty()) refuse_flags(*cmd, {"--output-dir"}, "without --emit", "it is where --emit writes");
    const train::FitResult fit = train::fit_training(args->model, request);
    // Settings for a step that does not fit are not settings to run with:
    // nothing is written (a checkpoint.py from an earlier run stays).
    if (!args->emit.empty() && fit.fits) {
      const auto [name, contents] = emitted_file(fit, args->emit);
      write_output((std::filesystem::path(args->output_dir) / name).string(), contents, args->emit + " settings");
    }
    if (!args->trace_out.empty() && fit.fits) write_step_trace(args->trace_out, fit.step);
    // The page shows a step that does not fit too: it says why, as the text does.
    if (!args->html.empty()) write_html(args->html, report::train_html(fit.step, report::fit_summary(fit)));
    if (!fit.fits && (!args->emit.empty() || !args->trace_out.empty()))
      std::fputs("gpumem: note: nothing written (--emit, --trace): nothing fit tried fits --gpu\n", err());
    if (args->json) {
      std::fputs((json_text(fit_to_json(fit), 2) + "\n").c_str(), out());
    } else {
      std::fputs(render_fit_text(fit).c_str(), out());
    }
    return fit.fits ? kExitOk : kExitDoesNotFit;
  };
}

}  // namespace gpumem::cli
