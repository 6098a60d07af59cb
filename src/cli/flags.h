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

namespace gpumem::cli {

// One vocabulary across commands (docs/cli.md). The memory of one GPU is
// `--gpu SIZE` everywhere; a file written is `-o/--output FILE`. The names
// commands used before stay as hidden aliases of the same value, and using
// one prints a one-line note naming the new flag.
CLI::Option* add_gpu_memory_option(CLI::App& cmd, std::string& value, const std::string& description);
CLI::Option* add_output_option(CLI::App& cmd, std::string& path, const std::string& description);
// Whose rules size a language model's memory (`--engine`, llm/engines.h)
// and vLLM's share of the GPU (`--gpu-memory-utilization`): the same two
// flags for `llm` and `serve-sim`.
void add_engine_options(CLI::App& cmd, std::string& engine, double& gpu_memory_utilization);

// A hidden old name for `new_name`: it sets `value` and notes the change.
CLI::Option* add_renamed_flag(CLI::App& cmd, const std::string& old_name, const std::string& new_name,
                              std::string& value);

// A flag the command cannot do without, checked after parsing so that its
// old name counts: "--gpu is required: <what it is>".
void require_flag(const std::string& name, const std::string& value, const std::string& what);

}  // namespace gpumem::cli
