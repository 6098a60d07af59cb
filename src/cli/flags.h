#pragma once
// Flag shapes every subcommand shares, so that flags of one kind behave
// alike everywhere: lists, counts, and their error messages.
#include <cstdint>
#include <initializer_list>
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
// A token count as users write a context length: 8192, 8k, 128K (binary:
// 8k = 8192, units.h parse_tokens). A transform: the option stores the count.
extern const CLI::Validator kTokenCount;

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
CLI::Option* add_renamed_flag(CLI::App& cmd, const std::string& old_name, const std::string& new_name, uint64_t& value,
                              const CLI::Validator& check);
CLI::Option* add_renamed_switch(CLI::App& cmd, const std::string& old_name, const std::string& new_name, bool& value);

// The tokens of one sequence are `--context TOKENS` on every command (llm's
// cached context, finetune's sequence, serve-sim's longest request). The
// names other tools use for it (--seq, --seq-len, --ctx-size, -c,
// --max-model-len...) are hidden aliases that note the change.
CLI::Option* add_context_option(CLI::App& cmd, uint64_t& tokens, const std::string& description);

// Whether the user gave flag `name` (under its name or an old one).
bool flag_given(const CLI::App& cmd, const std::string& name);

// A flag that does not apply is refused, never ignored: each of `flags`
// given throws InputError "FLAG does not apply <where>; <instead>" (exit 2).
void refuse_flags(const CLI::App& cmd, std::initializer_list<const char*> flags, const std::string& where,
                  const std::string& instead);

// A flag the command cannot do without, checked after parsing so that its
// old name counts: "--gpu is required: <what it is>".
void require_flag(const std::string& name, const std::string& value, const std::string& what);

}  // namespace gpumem::cli
