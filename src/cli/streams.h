#pragma once
// Where a command writes and reads: the process's stdout, stderr and stdin
// for the gpumem binary; memory for the Python module, which runs the same
// commands in-process (bindings/python) and hands the output back as values.
#include <cstdio>

namespace gpumem::cli {

struct Streams {
  std::FILE* out = stdout;
  std::FILE* err = stderr;
  std::FILE* in = stdin;
};

// Per thread, so two Python threads can run commands at once.
Streams& current_streams();
inline std::FILE* out() { return current_streams().out; }
inline std::FILE* err() { return current_streams().err; }
inline std::FILE* in() { return current_streams().in; }

// Points this thread's commands at other streams until it goes out of scope.
class StreamsOverride {
 public:
  explicit StreamsOverride(Streams streams) : saved_(current_streams()) { current_streams() = streams; }
  ~StreamsOverride() { current_streams() = saved_; }
  StreamsOverride(const StreamsOverride&) = delete;
  StreamsOverride& operator=(const StreamsOverride&) = delete;

 private:
  Streams saved_;
};

}  // namespace gpumem::cli
