#pragma once
// Each subcommand registers its flags on the app and returns the action to
// run once parsing succeeded. Actions return the process exit code.
#include <functional>

#include <CLI/CLI.hpp>

namespace gpumem::cli {

using Action = std::function<int()>;

Action add_inspect_command(CLI::App& app);
Action add_plan_command(CLI::App& app);
Action add_trace_command(CLI::App& app);
Action add_replay_command(CLI::App& app);
Action add_train_command(CLI::App& app);
Action add_fit_command(CLI::App& app);
Action add_weights_command(CLI::App& app);
Action add_quantize_command(CLI::App& app);
Action add_llm_command(CLI::App& app);
Action add_finetune_command(CLI::App& app);
Action add_explain_oom_command(CLI::App& app);
Action add_serve_sim_command(CLI::App& app);
Action add_exporter_command(CLI::App& app);
Action add_report_command(CLI::App& app);

}  // namespace gpumem::cli
