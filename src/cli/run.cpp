#include "cli/run.h"

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/flag_table.h"
#include "cli/parse_errors.h"
#include "cli/streams.h"
#include "gpumem/common/error.h"
#include "gpumem/common/files.h"
#include "gpumem/common/progress.h"

namespace gpumem::cli {

namespace {

int parse_and_run(const std::vector<std::string>& args) {
  CLI::App app{"gpumem: make GPU memory go further for deep-learning training and inference"};
  app.name("gpumem");
  app.require_subcommand(1);
  app.set_version_flag("--version", "gpumem 0.1.0");
  const Action inspect = add_inspect_command(app);
  const Action plan = add_plan_command(app);
  const Action trace = add_trace_command(app);
  const Action replay = add_replay_command(app);
  const Action train = add_train_command(app);
  const Action fit = add_fit_command(app);
  const Action weights = add_weights_command(app);
  const Action quantize = add_quantize_command(app);
  const Action llm = add_llm_command(app);
  const Action finetune = add_finetune_command(app);
  const Action explain_oom = add_explain_oom_command(app);
  const Action serve_sim = add_serve_sim_command(app);
  const Action exporter = add_exporter_command(app);
  const Action report = add_report_command(app);
  bool print_flag_table = false;
  add_flag_table_command(app, print_flag_table);
  // A progress bar for long work, on a terminal only, and never with --json.
  bool json = false;
  for (const std::string& a : args) json = json || a == "--json";
  set_progress_enabled(!json && out() == stdout);
  try {
    // CLI11 takes a vector in reverse order (it pops arguments off the back).
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return report_parse_error(app, e, args);
  }
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
    std::fputs(flag_table(app).c_str(), out());
    return kExitOk;
  }
  return kExitInternal;
}

}  // namespace

int run(const std::vector<std::string>& args) {
  const InputsOfThisCommand inputs;  // an output may not be one of them
  try {
    return parse_and_run(args);
  } catch (const InputError& e) {
    std::fprintf(err(), "gpumem: error: %s\n", one_line(e.what()).c_str());
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::fprintf(err(), "gpumem: internal error: %s\n", one_line(e.what()).c_str());
    return kExitInternal;
  }
}

}  // namespace gpumem::cli
