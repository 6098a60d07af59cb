#pragma once
// A progress bar on stderr for long work (reading a large trace, a planner
// search, a replay), drawn only when stderr is a terminal and the command
// asked for it (the CLI turns it on, and off for --json): scripts and logs
// never see it. No Debian package offers a C++ progress bar, so this is a
// small one: a thread redraws one line every 100 ms from atomics, so the
// work itself only adds to a counter.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

namespace gpumem {

// Whether Progress draws at all; off unless a front end turns it on.
void set_progress_enabled(bool enabled);
bool progress_enabled();

class Progress {
 public:
  // `total` units of work (0: unknown: elapsed time only). Draws on `out`
  // when progress is enabled and `out` is a terminal, or always with
  // `force` (tests).
  Progress(std::string label, std::uint64_t total, std::FILE* out = stderr, bool force = false);
  // A search bounded by time: the bar fills with the elapsed share of `seconds`.
  static Progress timed(std::string label, double seconds, std::FILE* out = stderr, bool force = false);
  ~Progress();  // clears the line
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  Progress(Progress&&) noexcept;

  void advance(std::uint64_t units = 1) noexcept;
  bool drawing() const noexcept { return state_ != nullptr; }

  // One line as drawn: "label [#####.....]  50%  3.1 s" (`width` marks).
  static std::string line(const std::string& label, std::uint64_t done, std::uint64_t total, double seconds,
                          int width = 30);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace gpumem
