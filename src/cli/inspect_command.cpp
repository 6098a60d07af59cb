#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/model_flags.h"
#include "cli/output_files.h"
#include "cli/size_flag.h"
#include "cli/streams.h"
#include "common/bounded_json.h"
#include "gpumem/infer/inference_need.h"
#include "gpumem/report/html/model_page.h"
#include "gpumem/report/inspect_report.h"

namespace gpumem::cli {

Action add_inspect_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "Where a model's memory goes: weights, activations, peak and where");
  struct Args {
    std::string model;
    ModelFlags flags;
    int top = 10;
    std::string overhead, html;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("MODEL", args->model, "ONNX model file")->required();
  add_model_flags(*cmd, args->flags);
  cmd->add_option("--top", args->top, "How many of the largest activations to list")->check(kNonNegativeInteger);
  cmd->add_option("--overhead", args->overhead,
                  "The runtime's own memory (CUDA context, workspaces), added to what inference needs")
      ->type_name("SIZE");
  cmd->add_flag("--json", args->json, "Print one JSON document (schema in docs/inspect.md)");
  add_html_flag(*cmd, args->html);

  return [args]() {
    InspectOptions options = to_inspect_options(args->flags);
    const InspectResult result = inspect_model(args->model, options);
    require_bound_dimensions(result.model);
    const uint64_t overhead = args->overhead.empty() ? 0 : parse_memory_flag("--overhead", args->overhead, true);
    ReportOptions report{args->top, infer::inference_need(result, overhead), {}};
    report.levers = infer::inference_levers(result, options, *report.need);
    if (args->json) {
      std::fputs((json_text(inspect_to_json(result, report), 2) + "\n").c_str(), out());
    } else {
      std::fputs(render_inspect_text(result, report).c_str(), out());
    }
    if (!args->html.empty()) write_html(args->html, report::model_html(result, nullptr));
    return 0;
  };
}

}  // namespace gpumem::cli
