#include "cli/flags.h"
#include "cli/streams.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>

#include "gpumem/common/error.h"

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
          "Old name of " + new_name)
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
