#pragma once
// Every subcommand, in one table: adding a command is its file
// (<name>_command.cpp, which registers its flags and returns the action to
// run once parsing succeeded) and its row below. Actions return the process
// exit code.
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

struct Command {
  const char* name;  // as typed, and as the subcommand registers itself
  Action (*add)(CLI::App& app);
};

// In the order `gpumem --help` lists them.
inline constexpr Command kCommands[] = {
    {"inspect", add_inspect_command},
    {"plan", add_plan_command},
    {"trace", add_trace_command},
    {"replay", add_replay_command},
    {"train", add_train_command},
    {"fit", add_fit_command},
    {"weights", add_weights_command},
    {"quantize", add_quantize_command},
    {"llm", add_llm_command},
    {"finetune", add_finetune_command},
    {"explain-oom", add_explain_oom_command},
    {"serve-sim", add_serve_sim_command},
    {"exporter", add_exporter_command},
    {"report", add_report_command},
};

}  // namespace gpumem::cli
