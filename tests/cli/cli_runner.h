#pragma once
// Runs the gpumem binary as a user would and collects what it said.
#include <sys/wait.h>
#include <unistd.h>
#include <array>
#include <cstdio>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace gpumem::test {

struct CliRun {
  int code = -1;
  std::string out;
  std::string err;
};

// A shell command line ending in gpumem's arguments, run with stderr
// collected apart.
inline CliRun run_shell(const std::string& command) {
  // ctest runs tests in parallel processes: one stderr file per process.
  const std::string err_file = testing::TempDir() + "gpumem_cli_stderr_" + std::to_string(getpid()) + ".txt";
  CliRun r;
  FILE* p = popen((command + " 2>" + err_file).c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (FILE* e = fopen(err_file.c_str(), "r")) {
    while ((n = fread(buf.data(), 1, buf.size(), e)) > 0) r.err.append(buf.data(), n);
    fclose(e);
  }
  return r;
}

// `gpumem ARGS` run in the directory `dir` (the current one when empty).
inline CliRun run_in(const std::string& dir, const std::string& args) {
  return run_shell((dir.empty() ? "" : "cd '" + dir + "' && ") + std::string(GPUMEM_CLI_PATH) + " " + args);
}

inline CliRun run(const std::string& args) { return run_in("", args); }

// The same, killed after `seconds`: a hang shows as exit code 137.
inline CliRun run_bounded(const std::string& args, int seconds = 10) {
  return run_shell("timeout -s KILL " + std::to_string(seconds) + " " + std::string(GPUMEM_CLI_PATH) + " " + args);
}

// A file under the test's temporary directory, named per process.
inline std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = testing::TempDir() + std::to_string(getpid()) + "_" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

}  // namespace gpumem::test
