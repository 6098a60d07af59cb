#pragma once
// A guess at what a file is from its first bytes, for one purpose: when a
// command cannot read a file, to say which command can ("this is a memory
// trace: try `gpumem trace stats`"). The readers themselves decide what
// they accept; this never does.
#include <optional>
#include <string>
#include <string_view>

namespace gpumem {

enum class LikelyKind { Unknown, OnnxModel, MemoryTrace };

LikelyKind likely_kind(std::string_view head);

// "it looks like a memory trace; read it with `gpumem trace stats FILE` or
// `gpumem replay FILE`" and the like for `file`; nullopt when the guess is
// Unknown or `expected` itself.
std::optional<std::string> other_kind_advice(std::string_view head, LikelyKind expected, const std::string& file);

}  // namespace gpumem
