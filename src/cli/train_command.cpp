#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/model_flags.h"
#include "cli/output_files.h"
#include "cli/size_flag.h"
#include "cli/step_flags.h"
#include "cli/streams.h"
#include "common/bounded_json.h"
#include "common/file_kind.h"
#include "gpumem/common/flag_names.h"
#include "gpumem/report/html/train_page.h"
#include "gpumem/report/train_report.h"
#include "gpumem/train/device_memory.h"
#include "gpumem/train/traced_step.h"

namespace gpumem::cli {

Action add_train_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("train", "One training step's memory, predicted op by op from the model graph");
  struct Args {
    std::string model, gpu;
    ModelFlags flags;
    StepFlags step_flags;
    std::string loss = "cross-entropy", step = "steady", frozen, trace_out;
    std::vector<std::string> checkpoint;
    std::string html;
    int top = 10;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("MODEL", args->model,
                  "ONNX model exported in training mode, or a step traced by gpumem.torch.estimate")
      ->required();
  add_shape_flags(*cmd, args->flags);
  add_gpu_memory_option(*cmd, args->gpu,
                        "Memory of one GPU, e.g. 24GiB: whether the step fits it (exit 3 when not); fit says what "
                        "would");
  add_step_flags(*cmd, args->step_flags);
  add_loss_flag(*cmd, args->loss);
  cmd->add_option("--frozen", args->frozen, "Parameters whose name matches this regular expression are frozen");
  cmd->add_option("--step", args->step, "steady (optimizer states exist) | first (they are created)")
      ->check(CLI::IsMember({"steady", "first"}));
  add_list_option(*cmd, "--checkpoint", args->checkpoint,
                  "Run these modules under torch.utils.checkpoint (e.g. layer2.1, encoder.layers.0)", "MODULE");
  cmd->add_option("--top", args->top, "How many of the largest tensors at the peak to list")
      ->check(kNonNegativeInteger);
  cmd->add_flag("--json", args->json, "Print one JSON document (schema in docs/train.md)");
  add_html_flag(*cmd, args->html);
  cmd->add_option("--trace", args->trace_out,
                  "Write the predicted step as a gpumem trace (replay it, or convert it for memory_viz)")
      ->type_name("FILE");

  return [args, cmd]() {
    train::TrainOptions o;
    o.model = to_inspect_options(args->flags);
    apply_step_flags(args->step_flags, o);
    o.loss = loss_named(args->loss);
    o.frozen = args->frozen;
    o.first_step = args->step == "first";
    o.checkpoint = args->checkpoint;
    const train::TrainingStep step = [&args, &o, cmd] {
      if (file_kind_at(args->model) != FileKind::TracedStep) return train::predict_training_step(args->model, o);
      // A traced step is the step PyTorch ran: its shapes, optimizer, precision,
      // checkpointing and loss were set when it was traced.
      refuse_flags(*cmd,
                   {GPUMEM_FLAG_BATCH, GPUMEM_FLAG_BATCH_DIM, GPUMEM_FLAG_DIM, GPUMEM_FLAG_OPTIMIZER,
                    GPUMEM_FLAG_PRECISION, GPUMEM_FLAG_DEVICE, GPUMEM_FLAG_GRADS, GPUMEM_FLAG_FOREACH, "--torch",
                    "--loss", GPUMEM_FLAG_FROZEN, "--step", GPUMEM_FLAG_CHECKPOINT},
                   "for a traced step",
                   "the traced step is what PyTorch ran: trace it again with gpumem.torch.estimate(...) and the "
                   "setting changed");
      return train::load_traced_step(args->model, o);
    }();
    const train::DeviceMemory device = train::device_memory(step);
    const uint64_t gpu = args->gpu.empty() ? 0 : parse_memory_flag("--gpu", args->gpu);
    const Verdict verdict{gpu, train::least_device_bytes(step, gpu)};
    for (const auto& w : step.warnings)
      std::fprintf(err(), "gpumem: warning: %s: %s\n", args->model.c_str(), w.c_str());
    if (!args->trace_out.empty()) write_step_trace(args->trace_out, step);
    if (args->json) {
      std::fputs((json_text(train_to_json(step, device, verdict, args->top), 2) + "\n").c_str(), out());
    } else {
      std::fputs(render_train_text(step, device, verdict, args->top).c_str(), out());
    }
    if (!args->html.empty()) write_html(args->html, report::train_html(step, report::train_summary(step, verdict)));
    return verdict.decided() && !verdict.fits() ? kExitDoesNotFit : kExitOk;
  };
}

}  // namespace gpumem::cli
