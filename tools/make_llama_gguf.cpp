// Writes a sparse llama-architecture GGUF of a given shape (no tensor data:
// a Llama-3-8B-sized file costs no disk) and prints one JSON line about it:
// the shape, the file's size, the tensors' bytes and parameters together.
// tools/llama_cpp_buffers.mjs runs it for each shape it records.
//
//   build/gpumem_make_llama_gguf --name llama-3-8b --layers 32 --embd 4096 --heads 32
//     --kv-heads 8 --ff 14336 --vocab 128256 --ctx-train 8192 [--head-dim N] [--tied]
//     [--type F16|Q8_0|Q4_K|...] [--rope-base 500000] [--eps 1e-5] -o /tmp/llama-3-8b.gguf
#include <cstdint>
#include <exception>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "gpumem/weights/gguf.h"
#include "support/llama_gguf.h"

int main(int argc, char** argv) {
  using namespace gpumem;
  CLI::App app{"Write a sparse llama-architecture GGUF of a given shape"};
  llm::LlamaShape s;
  std::string type = "F16", out;
  app.add_option("--name", s.name, "general.name")->required();
  app.add_option("--layers", s.n_layer)->required();
  app.add_option("--embd", s.n_embd)->required();
  app.add_option("--heads", s.n_head)->required();
  app.add_option("--kv-heads", s.n_head_kv)->required();
  app.add_option("--ff", s.n_ff)->required();
  app.add_option("--vocab", s.n_vocab)->required();
  app.add_option("--ctx-train", s.n_ctx_train)->required();
  app.add_option("--head-dim", s.head_dim, "0: embd / heads");
  app.add_flag("--tied", s.tied_embeddings, "no output.weight");
  app.add_option("--type", type, "ggml type of the matrices (F16, Q8_0, Q4_K, ...)");
  app.add_option("--rope-base", s.rope_freq_base);
  app.add_option("--eps", s.rms_norm_eps);
  app.add_option("--arch", s.architecture, "llama (default) or gemma2");
  app.add_option("--sliding-window", s.sliding_window, "gemma2: the window of its windowed layers");
  app.add_option("-o,--output", out, "the .gguf to write")->required();
  CLI11_PARSE(app, argc, argv);
  try {
    const weights::GgmlType* t = weights::ggml_type_named(type);
    if (t == nullptr) throw std::invalid_argument("unknown ggml type " + type);
    s.weight_type = t->id;
    const weights::GgufContents contents = llm::llama_gguf(s);
    weights::write_gguf_sparse(out, contents);
    const weights::WeightFile f = weights::read_gguf(out);
    uint64_t params = 0, bytes = 0;
    for (const weights::TensorEntry& e : f.tensors) {
      uint64_t n = 1;
      for (uint64_t d : e.shape) n *= d;
      params += n;
      bytes += e.bytes;
    }
    std::cout
        << nlohmann::json{{"path", out},           {"tensors", f.tensors.size()}, {"params", params},
                          {"tensor_bytes", bytes}, {"file_bytes", f.file_bytes},  {"weight_type", std::string(t->name)}}
               .dump()
        << "\n";
  } catch (const std::exception& e) {
    std::cerr << "gpumem_make_llama_gguf: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
