#include "common/bounded_json.h"

#include <fmt/format.h>

#include "gpumem/common/error.h"

namespace gpumem {
namespace {

void check_json_depth(std::string_view text, const std::string& where, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      if (ch == '\\')
        ++i;  // the escaped character cannot end the string
      else if (ch == '"')
        in_string = false;
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      if (++depth > max_depth)
        throw InputError(fmt::format("{}: JSON nested deeper than {} levels", printable(where), max_depth));
    } else if ((ch == ']' || ch == '}') && depth > 0) {
      --depth;  // unbalanced text is the parser's to report
    }
  }
}

}  // namespace

nlohmann::json parse_bounded_json(std::string_view text, const std::string& where, bool allow_exceptions,
                                  int max_depth) {
  check_json_depth(text, where, max_depth);
  return nlohmann::json::parse(text, nullptr, allow_exceptions);
}

std::string json_text(const nlohmann::json& doc, int indent) {
  return doc.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string json_text(const nlohmann::ordered_json& doc, int indent) {
  return doc.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace gpumem
