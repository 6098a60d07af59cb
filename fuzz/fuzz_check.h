#pragma once
// What every fuzz target checks its contract with: a broken promise aborts,
// which libFuzzer records as a crash and the corpus replay (make test)
// reports as a failure.
#include <cstdlib>
#include <exception>
#include <string>

namespace gpumem::fuzz {

inline void check(bool ok) {
  if (!ok) std::abort();
}

// An InputError's message: one line, not empty.
inline void check_one_line(const std::exception& e) {
  const std::string what = e.what();
  check(!what.empty() && what.find('\n') == std::string::npos);
}

}  // namespace gpumem::fuzz
