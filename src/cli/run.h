#pragma once
// The whole command line, from arguments to exit code: the gpumem binary's
// main() and the Python module (bindings/python) both call this, so a command
// gives the same answer from either.
#include <string>
#include <vector>

namespace gpumem::cli {

// args: what follows the program name. Writes to current_streams() (see
// streams.h); returns the exit code (gpumem/common/error.h).
int run(const std::vector<std::string>& args);

}  // namespace gpumem::cli
