#include "cli/flag_table.h"

#include <fmt/format.h>

namespace gpumem::cli {
namespace {

// Pipes inside a description would split its Markdown cell.
std::string cell(std::string text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

void rows(CLI::App& cmd, const std::string& path, std::string& out) {
  for (const CLI::Option* o : cmd.get_options()) {
    if (o->get_group().empty() || o->get_name() == "--help" || o->get_name().empty()) continue;
    std::string names;
    if (o->get_positional()) {
      names = o->get_name();
    } else {
      for (const auto& s : o->get_snames()) names += (names.empty() ? "-" : ", -") + s;
      for (const auto& l : o->get_lnames()) names += (names.empty() ? "--" : ", --") + l;
      names = "`" + names + "`";
    }
    const std::string value = o->get_type_size() == 0 ? "" : o->get_type_name();
    out += fmt::format("| `{}` | {} | {} | {} |\n", path, names, cell(value), cell(o->get_description()));
  }
  for (CLI::App* sub : cmd.get_subcommands({})) {
    if (sub->get_group().empty()) continue;
    rows(*sub, path + " " + sub->get_name(), out);
  }
}

}  // namespace

std::string flag_table(CLI::App& app) {
  std::string out = "| command | flag | value | meaning |\n| --- | --- | --- | --- |\n";
  for (CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_group().empty()) continue;
    rows(*sub, "gpumem " + sub->get_name(), out);
  }
  return out;
}

void add_flag_table_command(CLI::App& app, bool& chosen) {
  app.add_subcommand("flag-table", "Print every command's flags as a Markdown table (docs/cli.md)")
      ->group("")
      ->callback([&chosen] { chosen = true; });
}

}  // namespace gpumem::cli
