#include <cstdio>
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
#include "common/file_kind.h"
#include "gpumem/common/error.h"
#include "gpumem/common/files.h"
#include "gpumem/common/units.h"
#include "gpumem/plan/csv.h"
#include "gpumem/report/html/model_page.h"
#include "gpumem/report/plan_report.h"

namespace gpumem::cli {

Action add_plan_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("plan", "Offsets for every buffer in one arena: optimal where it can be proven");
  struct Args {
    std::string input;
    std::string validate;
    ModelFlags flags;
    std::string gpu;
    std::string overhead;
    double time_limit = 10.0;
    std::string solver = "auto";
    int64_t alignment = 0;
    std::string output, html;
    bool json = false;
    bool no_in_place = false;
    bool minimize = false;
    int threads = 0;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("INPUT", args->input, "MiniMalloc CSV (id,lower,upper,size[,alignment][,offset]) or ONNX model");
  cmd->add_option("--validate", args->validate, "Check the plan in this CSV (it needs an offset column) and stop");
  add_model_flags(*cmd, args->flags);
  add_gpu_memory_option(*cmd, args->gpu,
                        "Memory available (e.g. 512MiB, 1048576B): stop at the first plan that fits; exit 3 if none "
                        "is found");
  cmd->add_option("--overhead", args->overhead,
                  "Models: the runtime's own memory (CUDA context, workspaces), counted with the weights against --gpu")
      ->type_name("SIZE");
  cmd->add_flag("--minimize", args->minimize, "With --gpu: keep minimising the arena after a plan fits");
  cmd->add_option("--time-limit", args->time_limit, "Seconds for the exact search (default 10)")
      ->check(kNonNegativeNumber);
  cmd->add_option("--solver", args->solver,
                  "auto | heuristic | exact (exact: partitions of any size, and it minimises past --gpu)")
      ->check(CLI::IsMember({"auto", "heuristic", "exact"}));
  cmd->add_option("--alignment", args->alignment, "Align every offset to this many bytes")->check(kPositiveInteger);
  add_output_option(*cmd, args->output, "Write the plan as CSV (the input's columns plus offset)");
  cmd->add_flag("--json", args->json, "Print one JSON document (schema in docs/plan.md)");
  add_html_flag(*cmd, args->html);
  cmd->add_flag("--no-inplace", args->no_in_place, "Models: never write an output over a dying input");
  cmd->add_option("--threads", args->threads, "Threads for the exact search (default: the machine's, at most 4)")
      ->check(kNonNegativeInteger);

  return [args, cmd]() {
    if (!args->validate.empty()) {
      refuse_flags(*cmd,
                   {"INPUT", "--batch", "--batch-dim", "--dim", "--dtype", "--weights-dtype", "--activations-dtype",
                    "--gpu", "--overhead", "--minimize", "--time-limit", "--solver", "--alignment", "--output",
                    "--json", "--html", "--no-inplace", "--threads"},
                   "with --validate", "--validate checks a plan and stops; plan it in a second run");
      const infer::ValidationReport report = infer::validate_plan_file(args->validate);
      std::fputs(render_validation_text(report).c_str(), report.violation ? err() : out());
      return report.violation ? kExitInvalidPlan : kExitOk;
    }
    if (args->input.empty()) throw InputError("plan: give an INPUT file, or --validate PLAN.csv");
    if (infer::is_csv_path(args->input)) {
      // A CSV of something else (an RMM log, requests) says what it is first.
      if (auto wrong = wrong_kind_error(args->input, {FileKind::PlanCsv}, "a MiniMalloc CSV of buffers"))
        throw InputError(*wrong);
      // These shape a model's buffers; a CSV states its buffers itself.
      refuse_flags(*cmd,
                   {"--batch", "--batch-dim", "--dim", "--dtype", "--weights-dtype", "--activations-dtype",
                    "--no-inplace", "--overhead"},
                   "to a CSV of buffers (" + args->input + ")", "it shapes an ONNX model's buffers");
    }
    if (!args->flags.batch) refuse_flags(*cmd, {"--batch-dim"}, "without --batch", "it says which axis --batch binds");
    if (args->gpu.empty())
      refuse_flags(*cmd, {"--minimize"}, "without --gpu", "it goes on past the first plan that fits --gpu");
    infer::PlanRequest request;
    request.model = to_inspect_options(args->flags);
    request.solve.time_limit_seconds = args->time_limit;
    request.solve.threads = args->threads;
    request.solve.minimize = args->minimize;
    request.solve.solver = args->solver == "heuristic" ? plan::SolverKind::Heuristic
                           : args->solver == "exact"   ? plan::SolverKind::Exact
                                                       : plan::SolverKind::Auto;
    if (!args->gpu.empty()) request.solve.capacity = static_cast<int64_t>(parse_memory_flag("--gpu", args->gpu));
    if (args->alignment > 0) request.alignment = args->alignment;
    request.in_place = !args->no_in_place;
    if (!args->overhead.empty()) request.overhead_bytes = parse_memory_flag("--overhead", args->overhead, true);

    const infer::PlanReport report = infer::plan_file(args->input, request);
    // A plan that does not fit --gpu is not one to use: the file is not
    // written (the report says why; --html still shows it).
    if (!args->output.empty() && report.fits)
      write_output(args->output, plan::write_csv(report.problem, report.result.plan.offsets), "plan CSV");
    if (!args->output.empty() && !report.fits)
      std::fprintf(err(), "gpumem: note: %s not written: the plan does not fit --gpu\n",
                   printable(args->output).c_str());
    if (args->json) {
      std::fputs((json_text(plan_to_json(report), 2) + "\n").c_str(), out());
    } else {
      std::fputs(render_plan_text(report).c_str(), out());
    }
    if (!args->html.empty()) write_html(args->html, report::plan_html(report));
    return report.fits ? kExitOk : kExitDoesNotFit;
  };
}

}  // namespace gpumem::cli
