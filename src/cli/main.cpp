// gpumem: one binary, one subcommand per job. Subcommands only parse their
// arguments and call the library; cli/run.cpp strings them together.
#include <string>
#include <vector>

#include "cli/run.h"

int main(int argc, char** argv) { return gpumem::cli::run(std::vector<std::string>(argv + 1, argv + argc)); }
