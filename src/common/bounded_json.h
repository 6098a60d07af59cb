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

}  // namespace gpumem
