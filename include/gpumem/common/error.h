#pragma once
// Errors gpumem reports to its users.
//
// Every message is one line that names the file (or flag), the place in it and
// the problem, so the CLI can print it as is and exit non-zero.
#include <stdexcept>
#include <string>

namespace gpumem {

// Something the user handed us is wrong: a file, a flag, a value. The CLI
// exits with kExitBadInput for these.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;  // a bug or an unexpected failure
inline constexpr int kExitBadInput = 2;  // bad file, bad flag, bad value

}  // namespace gpumem
