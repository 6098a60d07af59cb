#pragma once
// Where tests find the project's bundled data.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace gpumem::test {

inline std::filesystem::path source_dir() { return GPUMEM_SOURCE_DIR; }
inline std::filesystem::path model_path(const std::string& name) {
  return source_dir() / "examples" / "models" / (name + ".onnx");
}

// A recorded trace under tests/data/traces/.
inline std::string trace_path(const std::string& name) {
  return (source_dir() / "tests" / "data" / "traces" / name).string();
}

// A bundled model's <name>.expected.json: the figures tools/export_models.py
// computed at export time, independently of gpumem.
inline nlohmann::json model_expected_figures(const std::string& name) {
  std::ifstream in(source_dir() / "examples" / "models" / (name + ".expected.json"));
  return nlohmann::json::parse(in);
}

inline std::string read_file_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace gpumem::test
