#include "cli/flags.h"
#include "cli/streams.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "gpumem/common/error.h"
#include "gpumem/common/units.h"

namespace gpumem::cli {

CLI::Option* add_list_option(CLI::App& cmd, const std::string& name, std::vector<std::string>& values,
                             const std::string& description, const std::string& value_name) {
  return cmd.add_option(name, values, description + " (repeat the flag, or separate with commas)")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->delimiter(',')
      ->type_name(value_name + "[,...]");
}

namespace {

CLI::Validator integer_at_least(long long least, const std::string& words, const std::string& name) {
  return CLI::Validator(
      [least, words](std::string& text) -> std::string {
        long long value = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (ec != std::errc() || end != text.data() + text.size() || value < least) {
          return "'" + text + "' is not " + words;
        }
        return {};
      },
      name);
}

}  // namespace

const CLI::Validator kPositiveInteger = integer_at_least(1, "a positive integer", "POSITIVE");
const CLI::Validator kNonNegativeInteger = integer_at_least(0, "an integer >= 0", "INTEGER>=0");

const CLI::Validator kNonNegativeNumber(
    [](std::string& text) -> std::string {
      char* end = nullptr;
      const double value = std::strtod(text.c_str(), &end);
      if (text.empty() || end != text.c_str() + text.size() || !(value >= 0)) {
        return "'" + text + "' is not a number >= 0";
      }
      return {};
    },
    "NUMBER>=0");

const CLI::Validator kTokenCount(
    [](std::string& text) -> std::string {
      const auto tokens = parse_tokens(text);
      if (!tokens || *tokens == 0) return "'" + text + "' is not a token count (e.g. 4096, 8k, 128k)";
      text = std::to_string(*tokens);
      return {};
    },
    "TOKENS");

namespace {

std::string old_name_of(const std::string& new_name) { return "Old name of " + new_name; }

std::function<void(const std::string&)> renamed_note(const std::string& old_name, const std::string& new_name) {
  return [old_name, new_name](const std::string&) {
    std::fprintf(err(), "gpumem: note: %s is now %s, the same flag on every command\n", old_name.c_str(),
                 new_name.c_str());
  };
}

}  // namespace

CLI::Option* add_renamed_flag(CLI::App& cmd, const std::string& old_name, const std::string& new_name, uint64_t& value,
                              const CLI::Validator& check) {
  return cmd.add_option(old_name, value, old_name_of(new_name))
      ->transform(check)
      ->each(renamed_note(old_name, new_name))
      ->group("");
}

CLI::Option* add_renamed_switch(CLI::App& cmd, const std::string& old_name, const std::string& new_name, bool& value) {
  return cmd
      .add_flag_function(
          old_name,
          [&value, note = renamed_note(old_name, new_name)](std::int64_t) {
            note("");
            value = true;
          },
          old_name_of(new_name))
      ->group("");
}

CLI::Option* add_context_option(CLI::App& cmd, uint64_t& tokens, const std::string& description) {
  CLI::Option* context =
      cmd.add_option("--context", tokens, description + " (e.g. 4096 or 8k)")->transform(kTokenCount);
  for (const char* old_name : {"--seq", "--seq-len", "--seq_len", "--seq-length", "--sequence-length", "--ctx",
                               "--ctx-size", "-c", "--n-ctx", "--num-ctx", "--max-model-len", "--context-length"}) {
    add_renamed_flag(cmd, old_name, "--context", tokens, kTokenCount);
  }
  return context;
}

bool flag_given(const CLI::App& cmd, const std::string& name) {
  for (const CLI::Option* o : cmd.get_options()) {
    if (o->count() == 0) continue;
    const std::string& about = o->get_description();
    // An old name's description is "Old name of <new name>", where the new
    // name may be written "-o/--output" or "the positional MODEL".
    const bool old_name =
        about.rfind(old_name_of(""), 0) == 0 && about.find(name, old_name_of("").size()) != std::string::npos;
    if (o->check_name(name) || old_name) return true;
  }
  return false;
}

void refuse_flags(const CLI::App& cmd, std::initializer_list<const char*> flags, const std::string& where,
                  const std::string& instead) {
  for (const char* flag : flags) {
    if (flag_given(cmd, flag)) {
      throw InputError(std::string(flag) + " does not apply " + where + (instead.empty() ? "" : "; " + instead));
    }
  }
}

CLI::Option* add_renamed_flag(CLI::App& cmd, const std::string& old_name, const std::string& new_name,
                              std::string& value) {
  return cmd
      .add_option_function<std::string>(
          old_name,
          [&value, old_name, new_name](const std::string& text) {
            std::fprintf(err(), "gpumem: note: %s is now %s, the same flag on every command\n", old_name.c_str(),
                         new_name.c_str());
            value = text;
          },
          old_name_of(new_name))
      ->group("");  // hidden from --help and from the flag table
}

CLI::Option* add_gpu_memory_option(CLI::App& cmd, std::string& value, const std::string& description) {
  CLI::Option* gpu = cmd.add_option("--gpu", value, description)->type_name("SIZE");
  for (const char* old_name : {"--budget", "--capacity"}) add_renamed_flag(cmd, old_name, "--gpu", value);
  return gpu;
}

void add_engine_options(CLI::App& cmd, std::string& engine, double& gpu_memory_utilization) {
  cmd.add_option("--engine", engine,
                 "Whose rules: llama.cpp[@BUILD], ollama[@VERSION] or vllm[@VERSION] (default: the newest llama.cpp)");
  cmd.add_option("--gpu-memory-utilization", gpu_memory_utilization,
                 "vllm: the share of the GPU vLLM may use (default 0.9)")
      ->check(CLI::Range(0.0, 1.0));
}

CLI::Option* add_output_option(CLI::App& cmd, std::string& path, const std::string& description) {
  CLI::Option* output = cmd.add_option("-o,--output", path, description)->type_name("FILE");
  add_renamed_flag(cmd, "--out", "-o/--output", path);
  return output;
}

void require_flag(const std::string& name, const std::string& value, const std::string& what) {
  if (value.empty()) throw InputError(name + " is required: " + what);
}

}  // namespace gpumem::cli
