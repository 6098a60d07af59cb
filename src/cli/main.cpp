// gpumem: one binary, one subcommand per job. Subcommands only parse their
// arguments and call the library.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/flag_table.h"
#include "cli/parse_errors.h"
#include "gpumem/common/error.h"
#include "gpumem/common/progress.h"

int main(int argc, char** argv) {
  CLI::App app{"gpumem: make GPU memory go further for deep-learning training and inference"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "gpumem 0.1.0");
  const gpumem::cli::Action inspect = gpumem::cli::add_inspect_command(app);
  const gpumem::cli::Action plan = gpumem::cli::add_plan_command(app);
  const gpumem::cli::Action trace = gpumem::cli::add_trace_command(app);
  const gpumem::cli::Action replay = gpumem::cli::add_replay_command(app);
  const gpumem::cli::Action train = gpumem::cli::add_train_command(app);
  const gpumem::cli::Action fit = gpumem::cli::add_fit_command(app);
  const gpumem::cli::Action weights = gpumem::cli::add_weights_command(app);
  const gpumem::cli::Action quantize = gpumem::cli::add_quantize_command(app);
  const gpumem::cli::Action llm = gpumem::cli::add_llm_command(app);
  const gpumem::cli::Action finetune = gpumem::cli::add_finetune_command(app);
  const gpumem::cli::Action explain_oom = gpumem::cli::add_explain_oom_command(app);
  const gpumem::cli::Action serve_sim = gpumem::cli::add_serve_sim_command(app);
  const gpumem::cli::Action exporter = gpumem::cli::add_exporter_command(app);
  const gpumem::cli::Action report = gpumem::cli::add_report_command(app);
  bool print_flag_table = false;
  gpumem::cli::add_flag_table_command(app, print_flag_table);
  // A progress bar for long work, on a terminal only, and never with --json.
  bool json = false;
  for (int i = 1; i < argc; ++i) json = json || std::string(argv[i]) == "--json";
  gpumem::set_progress_enabled(!json);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return gpumem::cli::report_parse_error(app, e, std::vector<std::string>(argv + 1, argv + argc));
  }
  try {
    if (app.got_subcommand("inspect")) return inspect();
    if (app.got_subcommand("plan")) return plan();
    if (app.got_subcommand("trace")) return trace();
    if (app.got_subcommand("replay")) return replay();
    if (app.got_subcommand("train")) return train();
    if (app.got_subcommand("fit")) return fit();
    if (app.got_subcommand("weights")) return weights();
    if (app.got_subcommand("quantize")) return quantize();
    if (app.got_subcommand("llm")) return llm();
    if (app.got_subcommand("finetune")) return finetune();
    if (app.got_subcommand("explain-oom")) return explain_oom();
    if (app.got_subcommand("serve-sim")) return serve_sim();
    if (app.got_subcommand("exporter")) return exporter();
    if (app.got_subcommand("report")) return report();
    if (print_flag_table) {
      std::fputs(gpumem::cli::flag_table(app).c_str(), stdout);
      return gpumem::kExitOk;
    }
  } catch (const gpumem::InputError& e) {
    std::fprintf(stderr, "gpumem: error: %s\n", e.what());
    return gpumem::kExitBadInput;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpumem: internal error: %s\n", e.what());
    return gpumem::kExitInternal;
  }
  return gpumem::kExitInternal;
}
