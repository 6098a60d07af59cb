#pragma once
// What every fuzz target checks its contract with: a broken promise aborts,
// which libFuzzer records as a crash and the corpus replay (make test)
// reports as a failure.
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

namespace gpumem::fuzz {

inline void check(bool ok) {
  if (!ok) std::abort();
}

// An InputError's message: one line, not empty.
inline void check_one_line(const std::exception& e) {
  const std::string what = e.what();
  check(!what.empty() && what.find('\n') == std::string::npos);
}

// A folder of this process's own under the temporary directory, for
// targets whose reader takes a path; made once.
inline std::filesystem::path scratch_folder(const std::string& tag) {
  auto dir = std::filesystem::temp_directory_path() / ("gpumem_fuzz_" + tag + "_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

// The input, as the file `path` (replaced).
inline void write_input(const std::filesystem::path& path, const std::uint8_t* data, std::size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

}  // namespace gpumem::fuzz
