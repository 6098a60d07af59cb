// `gpumem trace stats TRACE` and `gpumem trace convert TRACE --to FORMAT -o OUT`.
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/output_files.h"
#include "cli/streams.h"
#include "common/bounded_json.h"
#include "gpumem/common/error.h"
#include "gpumem/common/files.h"
#include "gpumem/common/units.h"
#include "gpumem/report/html/trace_page.h"
#include "gpumem/report/trace_report.h"
#include "gpumem/trace/formats.h"
#include "gpumem/trace/iteration_plan.h"
#include "gpumem/trace/lifetimes.h"

namespace gpumem::cli {

Action add_trace_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("trace", "Read memory traces: statistics and conversions");
  cmd->require_subcommand(1);
  struct Args {
    std::string input;
    bool json = false;
    bool strict = false;
    int device = -2;  // -2: the busiest device
    std::string to;
    std::string output;
    std::string html;
    double time_limit = 5.0;
  };
  auto args = std::make_shared<Args>();
  auto* stats = cmd->add_subcommand("stats", "Peak, largest and never-freed allocations, growth per iteration");
  stats
      ->add_option("TRACE", args->input,
                   "PyTorch snapshot pickle, torch.profiler JSON, RMM log, gpumem history or MiniMalloc CSV")
      ->required();
  stats->add_flag("--json", args->json, "Print one JSON document (schema in docs/trace.md)");
  add_html_flag(*stats, args->html);
  stats->add_flag("--strict", args->strict, "Fail on the first event that makes no sense instead of skipping it");
  stats->add_option("--device", args->device, "Device to analyse (default: the one with the most allocations)");
  auto* convert = cmd->add_subcommand("convert", "Write the trace in another format");
  convert->add_option("TRACE", args->input, "Any trace gpumem reads")->required();
  std::string written;
  for (const std::string& name : trace::written_format_names()) written += (written.empty() ? "" : " | ") + name;
  convert->add_option("--to", args->to, written)->required()->check(CLI::IsMember(trace::written_format_names()));
  add_output_option(*convert, args->output, "Output file (gzip when it ends in .gz; required)");
  convert->add_flag("--strict", args->strict, "Fail on damaged records instead of skipping them");
  convert->add_option("--device", args->device, "csv: the device whose allocations to write (default: busiest)");
  auto* plan = cmd->add_subcommand(
      "plan", "Plan the trace's last complete iteration for planned mode (a JSON file a job loads before it starts)");
  plan->add_option("TRACE", args->input, "Any trace gpumem reads, of two iterations or more")->required();
  add_output_option(*plan, args->output, "The plan, JSON (required)");
  plan->add_option("--time-limit", args->time_limit, "Seconds for the planner (default 5)")->check(kNonNegativeNumber);
  plan->add_option("--device", args->device, "Device to plan (default: the one with the most allocations)");

  return [args, stats, plan]() {
    if (!stats->parsed()) require_flag("-o/--output", args->output, "the file to write");
    trace::ReadOptions read;
    read.strict = args->strict;
    const trace::Trace t = trace::read_trace(args->input, read);
    const std::int32_t device = args->device == -2 ? trace::busiest_device(t) : args->device;
    if (stats->parsed()) {
      trace::require_memory_events(t);
      const trace::Lifetimes lifetimes = trace::extract_lifetimes(t, device, args->strict);
      const trace::TraceStats s = trace::trace_stats(t, lifetimes);
      if (args->json)
        std::fprintf(out(), "%s\n", json_text(trace_stats_to_json(s, args->input), 2).c_str());
      else
        std::fputs(render_trace_stats_text(s, args->input).c_str(), out());
      if (!args->html.empty()) write_html(args->html, report::trace_html(t, &s, nullptr, &lifetimes));
      return kExitOk;
    }
    if (plan->parsed()) {
      trace::require_memory_events(t, /*history_needed=*/true);
      const trace::TracePlan p =
          trace::plan_last_iteration(trace::extract_lifetimes(t, device, args->strict), args->input, args->time_limit);
      write_output(args->output, alloc::to_json(p.plan), "planned-mode plan");
      std::fprintf(out(), "Plan of iteration %zu of %zu: %zu requests, %zu from the arena; arena %s (%zu bytes, %s)\n",
                   p.iteration + 1, p.iterations, p.plan.sizes.size(), p.planned_requests,
                   format_bytes(p.plan.arena).c_str(), p.plan.arena,
                   p.plan.proven_optimal ? "proven optimal" : "best found");
      return kExitOk;
    }
    // An empty trace written from `{` or a profile without memory is not a
    // conversion: refused as `trace stats` refuses it (segments alone are a
    // snapshot's state, which the pytorch output keeps).
    trace::require_memory_events(t, /*history_needed=*/args->to != "pytorch");
    std::ostringstream out;
    trace::format_written_as(args->to)->write(t, device, args->strict, out);
    trace::write_trace_file(args->output, out.str());
    announce_written(args->output, fmt::format("{} trace, {} events", args->to, format_count(t.events.size())));
    for (const std::string& w : t.warnings) std::fprintf(err(), "gpumem: warning: %s\n", w.c_str());
    return kExitOk;
  };
}

}  // namespace gpumem::cli
