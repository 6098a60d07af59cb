#pragma once
// Errors gpumem reports to its users.
//
// Every message is one line that names the file (or flag), the place in it and
// the problem, so the CLI can print it as is and exit non-zero.
#include <stdexcept>
#include <string>
#include <string_view>

namespace gpumem {

// Something the user handed us is wrong: a file, a flag, a value. The CLI
// exits with kExitBadInput for these.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A name read from a file, made safe for a one-line message: control bytes
// are escaped as \xNN and names over 120 characters are cut with "...".
std::string printable(std::string_view name);

// A whole message made one line: control bytes escaped as \xNN, nothing cut.
// Every error gpumem prints goes through it, whatever names it quotes.
std::string one_line(std::string_view message);

// Exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;     // a bug or an unexpected failure
inline constexpr int kExitBadInput = 2;     // bad file, bad flag, bad value
inline constexpr int kExitDoesNotFit = 3;   // plan: the plan exceeds --capacity; replay: every policy runs out
inline constexpr int kExitInvalidPlan = 4;  // gpumem plan --validate: buffers collide

}  // namespace gpumem
