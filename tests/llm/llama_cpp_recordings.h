#pragma once
// What the tests against llama.cpp's own figures share: reading a recording
// of tests/data/llm (written by tools/llama_cpp_*.mjs), and the model gpumem
// reads from the sparse GGUF of a recorded shape, as llama.cpp loaded it.
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include <unistd.h>
#include <nlohmann/json.hpp>

#include "gpumem/llm/llm_model.h"
#include "gpumem/weights/gguf.h"
#include "support/llama_gguf.h"
#include "test_paths.h"

namespace gpumem::llm::test {

// tests/data/llm/NAME, parsed once per process.
inline const nlohmann::json& llama_cpp_recording(const std::string& name) {
  static std::map<std::string, nlohmann::json> docs;
  if (!docs.count(name)) {
    std::ifstream in(gpumem::test::source_dir() / "tests" / "data" / "llm" / name);
    docs[name] = nlohmann::json::parse(in);
  }
  return docs[name];
}

// A recorded shape: the fields the recording tools write.
inline LlamaShape recorded_shape(const nlohmann::json& j) {
  LlamaShape s;
  s.name = j["name"];
  s.architecture = j.value("architecture", "llama");
  s.sliding_window = j.value("sliding_window", 0u);
  s.n_layer = j["n_layer"];
  s.n_embd = j["n_embd"];
  s.n_head = j["n_head"];
  s.n_head_kv = j["n_head_kv"];
  s.head_dim = j.value("head_dim", 0u);
  s.n_ff = j["n_ff"];
  s.n_vocab = j["n_vocab"];
  s.n_ctx_train = j["n_ctx_train"];
  s.tied_embeddings = j.value("tied_embeddings", false);
  if (j.contains("weight_type")) s.weight_type = weights::ggml_type_named(j["weight_type"].get<std::string>())->id;
  s.rope_freq_base = j.value("rope_freq_base", 10000.0f);
  return s;
}

// Each shape once per process, read back from its sparse GGUF. The file is
// per process: ctest runs a file's tests in parallel processes, and one's
// remove() must not pull the file from under another's load.
inline const LlmModel& recorded_model(const nlohmann::json& shape) {
  static std::map<std::string, LlmModel> models;
  const std::string name = shape["name"];
  if (!models.count(name)) {
    const std::string path = testing::TempDir() + "gpumem_llama_cpp_" + std::to_string(getpid()) + "_" + name + ".gguf";
    weights::write_gguf_sparse(path, llama_gguf(recorded_shape(shape)));
    models[name] = load_llm_model(path);
    std::filesystem::remove(path);
  }
  return models[name];
}

}  // namespace gpumem::llm::test
