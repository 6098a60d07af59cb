#pragma once
// JSON from files, nested no deeper than a real file needs. nlohmann's
// parser keeps its own stack, but dumping, copying and tearing down a
// document recurse: a 100 KB file of nested arrays overflowed the stack
// (issue 34). Every DOM parse of a file's JSON goes through here.
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace gpumem {

inline constexpr int kMaxJsonDepth = 64;

// nlohmann::json::parse(text), after one linear pass over the text that
// throws InputError("WHERE: JSON nested deeper than 64 levels") if an
// object or array lies past the limit. The depth is not checked with a
// parser callback: with any callback, nlohmann 3.11 scans the whole parent
// on every object's end, so a header of 150,000 tensors took 20 minutes.
// Parse errors are nlohmann's exceptions, or with allow_exceptions false a
// discarded value, as from nlohmann::json::parse.
nlohmann::json parse_bounded_json(std::string_view text, const std::string& where, bool allow_exceptions = true,
                                  int max_depth = kMaxJsonDepth);

// A document as text. Strings read from files may hold bytes that are not
// UTF-8 (a tensor or op name in a damaged file); nlohmann's dump throws on
// them, so every document gpumem writes goes through here and gets U+FFFD
// in their place. indent -1: one line.
std::string json_text(const nlohmann::json& doc, int indent = -1);
std::string json_text(const nlohmann::ordered_json& doc, int indent = -1);  // keys in the order they were set

}  // namespace gpumem
