#pragma once
// CLI11's parse errors, told in gpumem's own format: one line on stderr,
// `gpumem: error: <command>: <problem>`, with a suggestion where one is
// obvious (a misspelt command or flag, a list given with spaces).
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace gpumem::cli {

// Prints help or the version when that was asked for (exit 0), the error
// line otherwise (exit 2). `args` are argv without the program name.
int report_parse_error(CLI::App& app, const CLI::ParseError& error, const std::vector<std::string>& args);

// The closest of `candidates` to `word`, when close enough to be a typo:
// empty otherwise.
std::string closest(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace gpumem::cli
