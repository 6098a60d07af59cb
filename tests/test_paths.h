#pragma once
// Where tests find the project's bundled data.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace gpumem::test {

inline std::filesystem::path source_dir() { return GPUMEM_SOURCE_DIR; }
inline std::filesystem::path model_path(const std::string& name) {
  return source_dir() / "examples" / "models" / (name + ".onnx");
}

inline std::string read_file_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace gpumem::test
