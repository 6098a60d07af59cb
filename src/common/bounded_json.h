#pragma once
// JSON from files, nested no deeper than a real file needs. nlohmann's
// parser keeps its own stack, but dumping, copying and tearing down a
// document recurse: a 100 KB file of nested arrays overflowed the stack
// (issue 34). Every DOM parse of a file's JSON passes this guard.
#include <string>

#include <nlohmann/json.hpp>

namespace gpumem {

inline constexpr int kMaxJsonDepth = 64;

// A parser callback for nlohmann::json::parse(text, guard) that throws
// InputError("WHERE: JSON nested deeper than 64 levels") on the first
// object or array past the limit.
nlohmann::json::parser_callback_t json_depth_guard(const std::string& where, int max_depth = kMaxJsonDepth);

// A document as text. Strings read from files may hold bytes that are not
// UTF-8 (a tensor or op name in a damaged file); nlohmann's dump throws on
// them, so every document gpumem writes goes through here and gets U+FFFD
// in their place. indent -1: one line.
std::string json_text(const nlohmann::json& doc, int indent = -1);
std::string json_text(const nlohmann::ordered_json& doc, int indent = -1);  // keys in the order they were set

}  // namespace gpumem
