// Replays fuzzer inputs without libFuzzer: calls LLVMFuzzerTestOneInput on
// every file named on the command line and every regular file under every
// directory named (recursively, in sorted order). Built with any compiler, it
// turns the corpus into a regression test: an input that crashes, or throws
// anything but InputError, fails the run.
//
//   fuzz_replay fuzz/corpus/onnx_loader [more files or directories...]
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace fs = std::filesystem;

namespace {

bool read_all(const fs::path& path, std::vector<uint8_t>& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
    return 2;
  }
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    const fs::path arg = argv[i];
    std::error_code ec;
    if (fs::is_directory(arg, ec)) {
      std::vector<fs::path> found;
      for (const auto& entry : fs::recursive_directory_iterator(arg, ec)) {
        if (entry.is_regular_file()) found.push_back(entry.path());
      }
      if (ec) {
        std::fprintf(stderr, "%s: cannot list: %s\n", arg.c_str(), ec.message().c_str());
        return 2;
      }
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(arg, ec)) {
      files.push_back(arg);
    } else {
      std::fprintf(stderr, "%s: no such file or directory\n", arg.c_str());
      return 2;
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "no inputs found\n");
    return 2;
  }
  std::vector<uint8_t> bytes;
  for (const auto& file : files) {
    if (!read_all(file, bytes)) {
      std::fprintf(stderr, "%s: cannot read\n", file.c_str());
      return 2;
    }
    // Named before it runs, so a crash's last line says which input did it.
    std::printf("%s (%zu bytes): ", file.c_str(), bytes.size());
    std::fflush(stdout);
    const auto start = std::chrono::steady_clock::now();
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
    std::printf("ok, %lld ms\n", static_cast<long long>(ms));
  }
  std::printf("replayed %zu inputs\n", files.size());
  return 0;
}
