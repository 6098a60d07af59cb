// The engines' rules, one row per release range, oldest first. A row says
// what changed at its first release; the figures it sets were measured on
// that engine (tests/data/llm/) or read from its source, as `source` says.
#include "gpumem/llm/engines.h"
#include "gpumem/common/flag_names.h"

#include <array>
#include <charconv>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/common/units.h"

namespace gpumem::llm {
namespace {

// A release as a number that orders: llama.cpp's build ("b4000" or
// "4000"), or a dotted version ("0.6.3", "v0.6.3") as major x 1e6 +
// minor x 1e3 + patch.
std::optional<uint64_t> release_number(std::string_view text, bool build) {
  if (build) {
    if (text.starts_with("b")) text.remove_prefix(1);
    uint64_t n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return n;
  }
  if (text.starts_with("v")) text.remove_prefix(1);
  uint64_t parts[3] = {0, 0, 0};
  const char* p = text.data();
  const char* const last = text.data() + text.size();
  for (int i = 0; i < 3; ++i) {
    const auto [end, ec] = std::from_chars(p, last, parts[i]);
    if (ec != std::errc() || parts[i] >= 1000) return std::nullopt;
    p = end;
    if (p == last) break;
    if (*p != '.' || i == 2) return std::nullopt;
    ++p;
  }
  if (p != last) return std::nullopt;
  return parts[0] * 1000000 + parts[1] * 1000 + parts[2];
}

// llama.cpp, by build: what each measured release allocated
// (tests/data/llm/llama_cpp_versions.json, the CPU builds node-llama-cpp
// ships; tools/llama_cpp_versions.mjs records them, llama_cpp_versions.md
// reads them). A row starts at the first measured build that shows its
// rules; a change between two measured builds is dated to the later one.
struct LlamaCppRow {
  uint64_t first_build;
  std::string_view changed;
  uint32_t ctx_padding, ctx_padding_no_flash;
  bool window_cache;
  GraphRules graph;
};
constexpr std::array<LlamaCppRow, 5> kLlamaCpp{{
    {3889,
     "n_ctx padded to 256 cells with flash attention, 32 without; windowed layers keep every cell; "
     "fewer live tensors than today in attention and the feed-forward, one embedding-wide beside the logits",
     256,
     32,
     false,
     {2, -2, -4, -2, -1, false}},
    {5590,
     "windowed layers get their own cache of window + ubatch cells (iSWA)",
     256,
     32,
     true,
     {2, -2, -4, -2, -1, false}},
    {6122, "more live tensors in attention and the feed-forward", 256, 32, true, {2, -2, 0, 0, 1, false}},
    {8095,
     "n_ctx padded to 256 cells with or without flash attention; two embedding-wide tensors beside the logits",
     256,
     256,
     true,
     {4, 0, 0, 0, 2, false}},
    {10361, "a quantized cache is read through a Hadamard rotation; the newest rules", 256, 256, true, {}},
}};

// vLLM, by version (tests/data/llm/public/vllm_sizing_notes.md).
struct VllmRow {
  uint64_t first;
  std::string_view first_name, changed;
  bool v1, non_torch, graphs_profiled;
};
constexpr std::array<VllmRow, 4> kVllm{{
    {4000, "0.4.0",
     "V0 engine: the profile peak is the drop in free memory (weights, activations, everything the process added)",
     false, false, false},
    {6004, "0.6.4", "V0 engine: weights, PyTorch's peak and non-torch memory counted apart", false, true, false},
    {8000, "0.8.0",
     "V1 engine: chunked prefill always on, pages per layer, windowed layers keep their window; CUDA graphs "
     "captured after the KV cache, outside the budget",
     true, true, false},
    {21000, "0.21.0", "CUDA graphs' memory estimated and taken from the budget before the KV cache", true, true, true},
}};

// ollama, by version: its own estimate (fs/ggml/ggml.go GraphSize, read at
// ollama v0.12.10) decides the layers it offloads up to 0.12.10; from
// 0.12.11 it measures the graph by allocating it (llama.cpp's own sizes).
struct OllamaRow {
  uint64_t first;
  std::string_view first_name, changed;
  bool estimate;
};
constexpr std::array<OllamaRow, 2> kOllama{{
    {1032, "0.1.32", "ollama's GraphSize estimate: graph, KV cache and weights per layer, unpadded", true},
    {12011, "0.12.11", "memory layouts measured by allocating the graph: llama.cpp's own sizes", false},
}};

[[noreturn]] void unknown(const std::string& spec, const std::string& why) {
  std::string known;
  for (const auto& line : known_engine_releases()) known += (known.empty() ? "" : "; ") + line;
  throw InputError(fmt::format(GPUMEM_FLAG_ENGINE ": '{}' {}; gpumem has rules for: {}", printable(spec), why, known));
}

// The row in force at `version` (the last whose first release is not
// after it), or the newest for an empty version.
template <typename Row, size_t N, typename First>
const Row* row_at(const std::array<Row, N>& rows, std::optional<uint64_t> version, First first) {
  if (!version) return &rows.back();
  const Row* found = nullptr;
  for (const Row& r : rows)
    if (first(r) <= *version) found = &r;
  return found;
}

std::string version_text(uint64_t v) { return fmt::format("{}.{}.{}", v / 1000000, v / 1000 % 1000, v % 1000); }

}  // namespace

std::vector<std::string> known_engine_releases() {
  std::vector<std::string> out;
  for (size_t i = 0; i < kLlamaCpp.size(); ++i) {
    const auto& r = kLlamaCpp[i];
    out.push_back(i + 1 < kLlamaCpp.size()
                      ? fmt::format("llama.cpp@b{} to b{}", r.first_build, kLlamaCpp[i + 1].first_build - 1)
                      : fmt::format("llama.cpp@b{} and later", r.first_build));
  }
  out.push_back(fmt::format("ollama@{} and later", kOllama.front().first_name));
  out.push_back(fmt::format("vllm@{} and later", kVllm.front().first_name));
  return out;
}

EngineRules engine_rules(const std::string& spec) {
  const size_t at = spec.find('@');
  const std::string name = spec.substr(0, at);
  const std::string version = at == std::string::npos ? std::string() : spec.substr(at + 1);
  EngineRules e;
  if (name == "llama.cpp" || name == "llamacpp" || name == "llama-cpp") {
    std::optional<uint64_t> build;
    if (!version.empty() && !(build = release_number(version, true)))
      unknown(spec, "is not a llama.cpp build (b4000 or 4000)");
    const LlamaCppRow* row = row_at(kLlamaCpp, build, [](const LlamaCppRow& r) { return r.first_build; });
    if (row == nullptr) unknown(spec, "is older than any build gpumem has measured");
    e.kind = EngineKind::kLlamaCpp;
    e.name = "llama.cpp";
    e.version = build ? fmt::format("b{}", *build) : "newest";
    const auto next = row + 1 == kLlamaCpp.end() ? nullptr : row + 1;
    e.releases = next ? fmt::format("b{} to b{}", row->first_build, next->first_build - 1)
                      : fmt::format("b{} and later", row->first_build);
    e.changes = std::string(row->changed);
    e.source = "measured: tests/data/llm/llama_cpp_versions.json";
    e.ctx_padding = row->ctx_padding;
    e.ctx_padding_no_flash = row->ctx_padding_no_flash;
    e.window_cache = row->window_cache;
    e.graph = row->graph;
    return e;
  }
  const auto dotted = [&](const char* what) {
    std::optional<uint64_t> v;
    if (!version.empty() && !(v = release_number(version, false)))
      unknown(spec, fmt::format("is not a {} version (such as 0.6.3)", what));
    return v;
  };
  if (name == "ollama") {
    const auto v = dotted("ollama");
    const OllamaRow* row = row_at(kOllama, v, [](const OllamaRow& r) { return r.first; });
    if (row == nullptr) unknown(spec, "is older than any version gpumem has rules for");
    if (!row->estimate) {
      // ollama then allocates as llama.cpp does: the newest llama.cpp's rules.
      EngineRules llama = engine_rules("llama.cpp");
      llama.name = "ollama";
      llama.version = v ? version_text(*v) : "newest";
      llama.changes = fmt::format("{} (llama.cpp {})", row->changed, llama.releases);
      llama.releases = fmt::format("{} and later", row->first_name);
      return llama;
    }
    e.kind = EngineKind::kOllama;
    e.name = "ollama";
    e.version = v ? version_text(*v) : std::string(row->first_name);
    e.releases = fmt::format("{} to 0.12.10", row->first_name);
    e.changes = std::string(row->changed);
    e.source = "read: ollama fs/ggml/ggml.go GraphSize and llm/memory.go at v0.12.10";
    return e;
  }
  if (name == "vllm" || name == "vLLM") {
    const auto v = dotted("vLLM");
    const VllmRow* row = row_at(kVllm, v, [](const VllmRow& r) { return r.first; });
    if (row == nullptr) unknown(spec, "is older than any version gpumem has rules for");
    e.kind = EngineKind::kVllm;
    e.name = "vllm";
    e.version = v ? version_text(*v) : "newest";
    const auto next = row + 1 == kVllm.end() ? nullptr : row + 1;
    e.releases = next ? fmt::format("{} to before {}", row->first_name, next->first_name)
                      : fmt::format("{} and later", row->first_name);
    e.changes = std::string(row->changed);
    e.source = "read: vLLM's worker and kv_cache_utils (tests/data/llm/public/vllm_sizing_notes.md)";
    e.vllm_v1 = row->v1;
    e.vllm_non_torch = row->non_torch;
    e.vllm_graphs_profiled = row->graphs_profiled;
    return e;
  }
  unknown(spec, "is not an engine");
}

}  // namespace gpumem::llm
