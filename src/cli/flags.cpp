#include "cli/flags.h"

#include <charconv>
#include <cstdlib>

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

}  // namespace gpumem::cli
