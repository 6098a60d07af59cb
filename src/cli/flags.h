#pragma once
// Flag shapes every subcommand shares, so that flags of one kind behave
// alike everywhere: lists, counts, and their error messages.
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace gpumem::cli {

// A list flag: repeat it or separate values with commas (`--dim a=1,b=2`,
// `--dim a=1 --dim b=2`). Values never run on past a space, so a list flag
// cannot swallow the positional argument after it.
CLI::Option* add_list_option(CLI::App& cmd, const std::string& name, std::vector<std::string>& values,
                             const std::string& description, const std::string& value_name);

// Checks with messages in words: CLI11's own print the type's whole range.
extern const CLI::Validator kPositiveInteger;
extern const CLI::Validator kNonNegativeInteger;
extern const CLI::Validator kNonNegativeNumber;

}  // namespace gpumem::cli
