#pragma once
// Which engine, at which version, runs the model: the rules that size its
// KV cache and its activations differ between llama.cpp releases, ollama's
// own estimate and vLLM. One table per engine (engines.cpp) says what
// changed and when; `--engine llama.cpp@b4000` picks the row in force at
// that release, a bare name the newest.
#include <cstdint>
#include <string>
#include <vector>

#include "gpumem/llm/llm_memory.h"

namespace gpumem::llm {

enum class EngineKind { kLlamaCpp, kOllama, kVllm };

// The rules of one engine release range.
struct EngineRules {
  EngineKind kind = EngineKind::kLlamaCpp;
  std::string name = "llama.cpp";  // "llama.cpp", "ollama" or "vllm"
  std::string version;             // as asked ("b4000", "0.6.3"), or the newest the table knows
  std::string releases;            // the range the rules hold for, e.g. "b3889 to b5589"
  std::string changes;             // what that range's first release changed
  std::string source;              // where the rules were read or measured

  // llama.cpp (and ollama's runner, which is llama.cpp):
  uint32_t ctx_padding = 256;           // n_ctx is rounded up to a multiple of this...
  uint32_t ctx_padding_no_flash = 256;  // ...or of this without flash attention
  bool window_cache = true;             // windowed layers have their own, smaller cache (iSWA); else all cells
  GraphRules graph;                     // the compute buffer's live tensors

  // vLLM:
  bool vllm_v1 = true;                // the V1 engine (0.8 on): blocks per layer group, tokens reported
  bool vllm_non_torch = true;         // 0.6.4 on: non-torch memory counted apart from the profile peak
  bool vllm_graphs_profiled = false;  // CUDA graphs' memory taken before the KV cache is sized

  // ollama, whichever rules size it (its own estimate, or llama.cpp's in
  // releases that allocate as llama.cpp does): its words (num_gpu) and its
  // library's defaults (4-bit tags) apply.
  bool is_ollama() const { return name == "ollama"; }
};

// The rules for "llama.cpp", "llama.cpp@b4000" (or @4000), "ollama",
// "ollama@0.5.7", "vllm", "vllm@0.6.3". InputError for an unknown engine,
// or a version older than the table, listing what it knows.
EngineRules engine_rules(const std::string& spec);

// Every engine and version range the tables hold, one line each, for
// errors and docs.
std::vector<std::string> known_engine_releases();

}  // namespace gpumem::llm
