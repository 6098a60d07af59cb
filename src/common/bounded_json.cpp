#include "common/bounded_json.h"

#include <fmt/format.h>

#include "gpumem/common/error.h"

namespace gpumem {

nlohmann::json::parser_callback_t json_depth_guard(const std::string& where, int max_depth) {
  return [where, max_depth](int depth, nlohmann::json::parse_event_t event, nlohmann::json& /*parsed*/) {
    if ((event == nlohmann::json::parse_event_t::object_start || event == nlohmann::json::parse_event_t::array_start) &&
        depth >= max_depth)
      throw InputError(fmt::format("{}: JSON nested deeper than {} levels", printable(where), max_depth));
    return true;
  };
}

std::string json_text(const nlohmann::json& doc, int indent) {
  return doc.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string json_text(const nlohmann::ordered_json& doc, int indent) {
  return doc.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace gpumem
