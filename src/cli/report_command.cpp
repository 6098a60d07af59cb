#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/model_flags.h"
#include "cli/output_files.h"
#include "common/file_kind.h"
#include "gpumem/report/html/report_file.h"

namespace gpumem::cli {

Action add_report_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "report", "One self-contained HTML page for a model or a trace: timelines, the arena, policies, leaks");
  struct Args {
    std::string input, output;
    ModelFlags flags;
    double time_limit = 5.0;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("INPUT", args->input, "An ONNX model, or any trace gpumem reads (see `gpumem trace stats`)")
      ->required();
  add_output_option(*cmd, args->output, "Where the HTML goes (required)");
  add_shape_flags(*cmd, args->flags);
  cmd->add_option("--time-limit", args->time_limit, "Seconds for the planner's optimum (0: heuristics only; default 5)")
      ->check(kNonNegativeNumber);
  return [args, cmd]() {
    require_flag("-o/--output", args->output, "where the HTML goes");
    if (file_kind_at(args->input) != FileKind::OnnxModel)
      refuse_flags(*cmd, {"--batch", "--batch-dim", "--dim"}, "to a trace (" + args->input + ")",
                   "it shapes an ONNX model's buffers; a trace states its own");
    if (args->flags.batch == std::nullopt)
      refuse_flags(*cmd, {"--batch-dim"}, "without --batch", "it says which axis --batch binds");
    report::HtmlRequest request;
    request.model = to_inspect_options(args->flags);
    request.time_limit = args->time_limit;
    write_html(args->output, report::report_html(args->input, request));
    return 0;
  };
}

}  // namespace gpumem::cli
