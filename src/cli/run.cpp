#include "cli/run.h"

#include <cstdio>
#include <exception>
#include <string>
#include <utility>
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
  std::vector<std::pair<const char*, Action>> actions;
  for (const Command& command : kCommands) actions.emplace_back(command.name, command.add(app));
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
  for (const auto& [name, action] : actions)
    if (app.got_subcommand(name)) return action();
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
