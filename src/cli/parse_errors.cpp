#include "cli/parse_errors.h"
#include "cli/streams.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include <fmt/format.h>

#include "gpumem/common/error.h"

namespace gpumem::cli {
namespace {

// Edits (insert, delete, substitute, swap two neighbours) from a to b.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// The subcommand the user got to, and its words: "trace stats".
CLI::App* deepest(CLI::App& app, std::string& path) {
  CLI::App* at = &app;
  for (;;) {
    const auto chosen = at->get_subcommands();
    if (chosen.empty()) return at;
    at = chosen.front();
    path += (path.empty() ? "" : " ") + at->get_name();
  }
}

// Every command's words, for suggestions across levels: `gpumem stats`
// means `gpumem trace stats`.
void command_paths(CLI::App& app, const std::string& prefix, std::vector<std::string>& out) {
  for (CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_group().empty()) continue;  // hidden
    const std::string path = prefix.empty() ? sub->get_name() : prefix + " " + sub->get_name();
    if (sub->get_subcommands({}).empty()) out.push_back(path);
    command_paths(*sub, path, out);
  }
}

std::vector<std::string> flag_names(const CLI::App& cmd) {
  std::vector<std::string> names;
  for (const CLI::Option* o : cmd.get_options()) {
    if (o->get_group().empty()) continue;  // old names: suggest the current one
    for (const auto& n : o->get_lnames()) names.push_back("--" + n);
  }
  return names;
}

std::string unknown_command(CLI::App& app, CLI::App& at, const std::string& path,
                            const std::vector<std::string>& args) {
  // The word after the command path is what the user meant as a command.
  size_t words = path.empty() ? 0 : static_cast<size_t>(std::count(path.begin(), path.end(), ' ') + 1);
  std::vector<std::string> positional;
  for (const auto& a : args) {
    if (!a.empty() && a[0] != '-') positional.push_back(a);
  }
  std::vector<std::string> here;
  for (CLI::App* sub : at.get_subcommands({}))
    if (!sub->get_group().empty()) here.push_back(sub->get_name());
  const std::string choices = fmt::format("{}", fmt::join(here, ", "));
  if (positional.size() <= words)
    return fmt::format("give a command: {} (see `gpumem {}--help`)", choices, path.empty() ? "" : path + " ");
  const std::string& word = positional[words];
  std::vector<std::string> paths;
  command_paths(app, "", paths);
  std::string guess;
  const std::string typed = path.empty() ? word : path + " " + word;
  for (const auto& p : paths) {
    // `stats` alone names the leaf of `trace stats`.
    if (p.size() > word.size() && p.compare(p.size() - word.size(), word.size(), word) == 0 &&
        p[p.size() - word.size() - 1] == ' ')
      guess = p;
  }
  if (guess.empty()) guess = closest(typed, paths);
  return fmt::format("unknown command '{}' (commands: {}){}", word, choices,
                     guess.empty() ? "" : fmt::format("; did you mean `gpumem {}`?", guess));
}

std::string unexpected_arguments(const CLI::App& cmd, const std::vector<std::string>& args) {
  const std::vector<std::string> extras = cmd.remaining();
  if (extras.empty()) return "unexpected argument";
  const std::string& extra = extras.front();
  if (extra.rfind("-", 0) == 0) {
    const std::string flag = extra.substr(0, extra.find('='));
    const std::string guess = closest(flag, flag_names(cmd));
    return fmt::format("unknown flag {}{}", flag, guess.empty() ? "" : fmt::format("; did you mean {}?", guess));
  }
  // A value after a list flag, given with a space: lists take commas.
  const auto it = std::find(args.begin(), args.end(), extra);
  for (auto back = it; back != args.begin();) {
    --back;
    if (back->rfind("--", 0) != 0) continue;
    const CLI::Option* o = nullptr;
    try {
      o = cmd.get_option(*back);
    } catch (const CLI::OptionNotFound&) {
    }
    if (o && o->get_items_expected_max() > 1) {
      return fmt::format(
          "unexpected argument '{}': to give {} several values, separate them with commas ({} {},{}) or repeat the "
          "flag",
          extra, *back, *back, *std::next(back), extra);
    }
    break;
  }
  return fmt::format("unexpected argument '{}'", extra);
}

// "Could not convert: --device = abc" in words: "--device: 'abc' is not an
// integer".
std::string conversion(const CLI::App& cmd, const std::string& what) {
  const std::string prefix = "Could not convert: ";
  const auto eq = what.find(" = ");
  if (what.rfind(prefix, 0) != 0 || eq == std::string::npos) return what;
  const std::string flag = what.substr(prefix.size(), eq - prefix.size());
  const std::string value = what.substr(eq + 3);
  std::string kind = "a valid value";
  try {
    const std::string type = cmd.get_option(flag)->get_type_name();
    if (type == "INT" || type == "UINT") kind = "an integer";
    if (type == "FLOAT") kind = "a number";
  } catch (const CLI::OptionNotFound&) {
  }
  return fmt::format("{}: '{}' is not {}", flag, value, kind);
}

}  // namespace

std::string closest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

int report_parse_error(CLI::App& app, const CLI::ParseError& error, const std::vector<std::string>& args) {
  if (dynamic_cast<const CLI::CallForHelp*>(&error) || dynamic_cast<const CLI::CallForAllHelp*>(&error) ||
      dynamic_cast<const CLI::CallForVersion*>(&error)) {
    // Help and version go where the command's output goes (memory, in Python).
    std::ostringstream help;
    std::ostringstream problem;
    const int code = app.exit(error, help, problem);
    std::fputs(help.str().c_str(), out());
    std::fputs(problem.str().c_str(), err());
    return code;
  }
  std::string path;
  CLI::App* at = deepest(app, path);
  std::string message;
  if (dynamic_cast<const CLI::RequiredError*>(&error) && !at->get_subcommands({}).empty() &&
      at->get_subcommands().empty()) {
    message = unknown_command(app, *at, path, args);
  } else if (dynamic_cast<const CLI::ExtrasError*>(&error)) {
    message = unexpected_arguments(*at, args);
  } else if (dynamic_cast<const CLI::ConversionError*>(&error)) {
    message = conversion(*at, error.what());
  } else {
    message = error.what();
  }
  std::fputs(fmt::format("gpumem: error: {}\n", one_line((path.empty() ? "" : path + ": ") + message)).c_str(), err());
  return kExitBadInput;
}

}  // namespace gpumem::cli
