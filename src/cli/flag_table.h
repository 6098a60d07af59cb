#pragma once
// Every flag of every command as one Markdown table, written from the CLI's
// own definitions: docs/cli.md holds it, and a test checks the two agree, so
// the reference cannot drift from the binary.
#include <string>

#include <CLI/CLI.hpp>

namespace gpumem::cli {

std::string flag_table(CLI::App& app);

// `gpumem flag-table`, hidden from --help: prints the table.
void add_flag_table_command(CLI::App& app, bool& chosen);

}  // namespace gpumem::cli
