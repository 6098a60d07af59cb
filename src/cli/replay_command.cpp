// `gpumem replay TRACE [--policy NAME ...] [--gpu SIZE] [--json]`.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/output_files.h"
#include "cli/size_flag.h"
#include "cli/streams.h"
#include "common/bounded_json.h"
#include "gpumem/alloc/policies/policy_registry.h"
#include "gpumem/common/error.h"
#include "gpumem/common/units.h"
#include "gpumem/report/html/charts.h"
#include "gpumem/report/html/trace_page.h"
#include "gpumem/report/trace_report.h"
#include "gpumem/trace/formats.h"
#include "gpumem/trace/replay.h"

namespace gpumem::cli {
namespace {

// From the policy table: every name, and the ones replay leaves out unless named.
std::string policy_help() {
  std::string all, asked_for;
  for (const alloc::PolicyEntry& p : alloc::policy_registry()) {
    all += (all.empty() ? "" : " | ") + std::string(p.name);
    if (!p.replayed_by_default) asked_for += (asked_for.empty() ? "" : ", ") + std::string(p.name);
  }
  return all + (asked_for.empty() ? " (default: all)" : " (default: all but " + asked_for + ")");
}

// From the format table: the policy each format's traces are recorded under.
std::string current_help() {
  std::vector<std::pair<std::string, std::string>> by_policy;  // policy, its formats
  for (const trace::TraceFormat& f : trace::trace_formats()) {
    if (!*f.recorded_under) continue;
    auto it =
        std::find_if(by_policy.begin(), by_policy.end(), [&](const auto& p) { return p.first == f.recorded_under; });
    if (it == by_policy.end())
      by_policy.emplace_back(f.recorded_under, f.description);
    else
      it->second += std::string(" or ") + f.description;
  }
  std::string defaults;
  for (const auto& [policy, formats] : by_policy)
    defaults += (defaults.empty() ? "" : ", ") + policy + " for " + formats;
  return "The policy the trace was recorded under, for the advice (default: " + defaults + ")";
}

}  // namespace

Action add_replay_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "replay", "Replay a trace's allocations under allocator policies, against the best possible packing");
  struct Args {
    std::string input;
    std::vector<std::string> policies;
    std::string gpu;
    bool json = false;
    bool strict = false;
    double time_limit = 5.0;
    int device = -2;
    std::string current, html;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("TRACE", args->input, "Any trace gpumem reads (see `gpumem trace stats`)")->required();
  add_list_option(*cmd, "--policy", args->policies, policy_help(), "NAME");
  add_gpu_memory_option(*cmd, args->gpu, "Memory of the GPU (e.g. 80GiB): report where each policy runs out");
  cmd->add_flag("--json", args->json, "Print one JSON document (schema in docs/trace.md)");
  add_html_flag(*cmd, args->html);
  cmd->add_flag("--strict", args->strict, "Fail on the first event that makes no sense instead of skipping it");
  cmd->add_option("--time-limit", args->time_limit, "Seconds for the planner's optimum (0 skips it; default 5)")
      ->check(kNonNegativeNumber);
  cmd->add_option("--device", args->device, "Device to replay (default: the one with the most allocations)");
  cmd->add_option("--current", args->current, current_help());

  return [args]() {
    trace::ReadOptions read;
    read.strict = args->strict;
    const trace::Trace t = trace::read_trace(args->input, read);
    trace::require_memory_events(t, /*history_needed=*/true);
    trace::ReplayOptions options;
    options.policies = args->policies;
    options.strict = args->strict;
    options.optimal_time_limit = args->time_limit;
    options.current_policy = args->current;
    if (args->device != -2) options.device = args->device;
    if (!args->gpu.empty()) options.capacity = parse_memory_flag("--gpu", args->gpu);
    if (!args->html.empty()) options.timeline_columns = report::html::kHtmlColumns;
    const trace::ReplayReport report = trace::replay(t, options);
    if (!args->html.empty()) write_html(args->html, report::trace_html(t, nullptr, &report));
    if (args->json)
      std::fprintf(out(), "%s\n", json_text(replay_to_json(report), 2).c_str());
    else {
      for (const std::string& w : t.warnings) std::fprintf(err(), "gpumem: warning: %s\n", w.c_str());
      std::fputs(render_replay_text(report).c_str(), out());
    }
    // As `plan`: with --gpu, exit 3 when nothing replayed fits it.
    return trace::every_policy_runs_out(report) ? kExitDoesNotFit : kExitOk;
  };
}

}  // namespace gpumem::cli
