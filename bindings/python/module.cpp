// _gpumem: the C++ side of `import gpumem`. It runs gpumem's commands
// in-process (the same code path as the binary, cli/run.h) with their output
// captured in memory, and parses out-of-memory messages directly. Everything
// else, arguments from keyword arguments and result objects from JSON, is
// Python (gpumem/).
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "cli/run.h"
#include "cli/streams.h"

namespace py = pybind11;

namespace {

// A stream in memory that the commands write to with C stdio.
class MemoryStream {
 public:
  MemoryStream() : file_(open_memstream(&data_, &size_)) {
    if (file_ == nullptr) throw std::runtime_error("gpumem: open_memstream failed");
  }
  ~MemoryStream() {
    if (file_ != nullptr) std::fclose(file_);
    std::free(data_);
  }
  MemoryStream(const MemoryStream&) = delete;
  MemoryStream& operator=(const MemoryStream&) = delete;
  std::FILE* file() const { return file_; }
  std::string take() {
    std::fflush(file_);
    return std::string(data_ == nullptr ? "" : data_, size_);
  }

 private:
  char* data_ = nullptr;
  size_t size_ = 0;
  std::FILE* file_;
};

// Runs `gpumem ARGS...` with stdin reading `input` (empty when none) and
// returns (exit code, stdout bytes, stderr text).
std::tuple<int, py::bytes, std::string> run(const std::vector<std::string>& args,
                                            const std::optional<std::string>& input) {
  MemoryStream out;
  MemoryStream err;
  std::string input_text = input.value_or("");
  // fmemopen refuses a zero-length buffer on some libcs: an empty stdin is
  // a one-byte buffer read as zero bytes.
  char empty = '\0';
  std::FILE* in = input_text.empty() ? fmemopen(&empty, 1, "r") : fmemopen(input_text.data(), input_text.size(), "r");
  if (in == nullptr) throw std::runtime_error("gpumem: fmemopen failed");
  if (input_text.empty()) std::fseek(in, 0, SEEK_END);
  int code = 0;
  {
    py::gil_scoped_release release;  // commands can take seconds; other threads run meanwhile
    const gpumem::cli::StreamsOverride streams({out.file(), err.file(), in});
    code = gpumem::cli::run(args);
  }
  std::fclose(in);
  return {code, py::bytes(out.take()), err.take()};
}

}  // namespace

PYBIND11_MODULE(_gpumem, m) {
  m.doc() = "gpumem's commands, run in-process; use the gpumem package, not this module";
  m.def("run", &run, py::arg("args"), py::arg("input") = std::nullopt,
        "Run `gpumem ARGS...` in this process: (exit code, stdout as bytes, stderr as text)");
  m.attr("version") = "0.1.0";
}
