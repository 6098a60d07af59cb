// gpumem's KV cache against the figures llama.cpp printed in load logs that
// users posted publicly (tests/data/llm/public/llama_cpp_logs.json, each
// with its thread): 2023 to 2025 builds, CPU, CUDA, ROCm, Metal and Vulkan,
// dense, grouped-query, multi-query, mixture-of-experts, DeepSeek's two
// cache layouts (per-head K/V and MLA's compressed rows), quantized caches,
// several sequences and gpt-oss's interleaved sliding window. Nothing here
// was fitted: the model is rebuilt from the hyperparameters the log (or the
// model's config.json) gives, and the cache is summed over the backends the
// log prints.
#include <cmath>
#include <cstdio>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "gpumem/llm/engines.h"
#include "gpumem/llm/llm_memory.h"
#include "llama_cpp_recordings.h"

namespace gpumem::llm {
namespace {

const nlohmann::json& logs() { return test::llama_cpp_recording("public/llama_cpp_logs.json")["logs"]; }

std::string text_or(const nlohmann::json& j, const char* key, const std::string& fallback) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : fallback;
}
uint64_t number_or(const nlohmann::json& j, const char* key, uint64_t fallback) {
  return j.contains(key) && j[key].is_number() ? j[key].get<uint64_t>() : fallback;
}

// The model as llama.cpp loaded it, from the log's hyperparameters.
LlmModel model_of(const nlohmann::json& h) {
  LlmModel m;
  m.architecture = h["arch"];
  m.n_layer = h["n_layer"];
  m.n_embd = h["n_embd"];
  m.n_head = h["n_head"];
  // ggjt-era logs print no KV-head count: every head had its own K and V.
  m.n_head_kv = static_cast<uint32_t>(number_or(h, "n_head_kv", m.n_head));
  m.head_dim_k = h["head_dim_k"];
  m.head_dim_v = h["head_dim_v"];
  m.n_ff = h["n_ff"];
  m.n_vocab = h["n_vocab"];
  m.n_expert = static_cast<uint32_t>(number_or(h, "n_expert", 0));
  m.n_expert_used = static_cast<uint32_t>(number_or(h, "n_expert_used", 0));
  m.sliding_window = number_or(h, "n_swa", 0);
  if (m.sliding_window != 0) {
    // gpt-oss, the one windowed log: llama.cpp's swa pattern 2, every
    // other layer windowed, the first one included.
    m.swa_layers.resize(m.n_layer);
    for (uint32_t i = 0; i < m.n_layer; ++i) m.swa_layers[i] = i % 2 == 0;
  }
  return m;
}

// The layers whose cache the log's lines cover: all of them, or (an old log
// that printed only the GPU's part) the offloaded ones, "22/33".
uint32_t layers_printed(const nlohmann::json& l, uint32_t n_layer) {
  const auto& kv = l["buffers_mib"]["kv"];
  if (kv.size() == 1 && kv[0]["backend"].get<std::string>().find("offloaded layers") != std::string::npos) {
    const std::string offloaded = l["context"]["n_gpu_layers_offloaded"];
    return static_cast<uint32_t>(std::stoul(offloaded.substr(0, offloaded.find('/'))));
  }
  return n_layer;
}

// llama.cpp's rules at the log's build where the log names one; the
// newest otherwise (every such log's n_ctx is a multiple of 256, where no
// release's padding changes the cells).
EngineRules rules_of(const nlohmann::json& l) {
  const std::string version = text_or(l, "version", "");
  if (l["engine"] == "llama.cpp" && version.starts_with("b"))
    return engine_rules("llama.cpp@" + version.substr(0, version.find(' ')));
  return engine_rules("llama.cpp");
}

TEST(LlamaCppLogs, KvCacheIsTheLogsOnEveryShape) {
  std::set<std::string> shapes;
  int compared = 0;
  for (const auto& l : logs()) {
    const auto& kv_lines = l["buffers_mib"]["kv"];
    if (kv_lines.empty()) continue;
    const LlmModel m = model_of(l["hparams"]);
    const auto& c = l["context"];
    const uint64_t n_ctx = c["n_ctx"], seqs = number_or(c, "n_seq_max", 1);
    const KvTypes types{kv_type(text_or(c, "type_k", "f16")), kv_type(text_or(c, "type_v", "f16"))};
    const EngineRules e = rules_of(l);
    const bool flash = c.contains("flash_attn") && c["flash_attn"].is_boolean() && c["flash_attn"].get<bool>();
    const KvLayout layout{flash ? e.ctx_padding : e.ctx_padding_no_flash, e.window_cache};
    // llama.cpp's n_ctx is every sequence's cells together.
    const KvCache kv =
        kv_cache(m, types, n_ctx / seqs, seqs, 0, layers_printed(l, m.n_layer), number_or(c, "n_ubatch", 512), layout);
    double printed = 0;
    for (const auto& line : kv_lines) printed += line["mib"].get<double>();
    const double ours = static_cast<double>(kv.bytes) / (1 << 20);
    // Printed to 0.01 MiB per line.
    EXPECT_NEAR(ours, printed, 0.01 * static_cast<double>(kv_lines.size())) << l["id"];
    std::printf("%-64s KV %10.2f MiB, llama.cpp %10.2f MiB\n", l["id"].get<std::string>().c_str(), ours, printed);
    ++compared;
    const auto& h = l["hparams"];
    shapes.insert(fmt::format("{}/{}/{}/{}/{}/{}", h["arch"].dump(), h["n_layer"].dump(), h["n_embd"].dump(),
                              h["n_head_kv"].dump(), h["head_dim_k"].dump(), h["n_expert"].dump()));
  }
  // The issue's goal: at least 12 shapes.
  EXPECT_GE(shapes.size(), 12u);
  EXPECT_GE(compared, 18);
}

TEST(LlamaCppLogs, GptOssWindowedLayersKeepTheWindowAndAMicroBatch) {
  // b6182 without flash attention: the 12 windowed layers' cache holds
  // n_swa + n_ubatch = 640 cells, a multiple of that build's padding of 32
  // (the newest rules, padding 256, would give 768).
  for (const auto& l : logs()) {
    if (l["id"] != "gpt-oss-20b-mxfp4-b6182-vulkan-issue16188") continue;
    const LlmModel m = model_of(l["hparams"]);
    const EngineRules e = engine_rules("llama.cpp@b6182");
    const KvCache kv =
        kv_cache(m, {kv_type("f16"), kv_type("f16")}, 4096, 1, 0, ~0u, 512, {e.ctx_padding_no_flash, e.window_cache});
    EXPECT_EQ(kv.window_cells, 640u);
    EXPECT_EQ(kv.windowed_layers, 12u);
    EXPECT_EQ(kv.bytes, (96ull + 15ull) << 20);
    return;
  }
  FAIL() << "the gpt-oss log is missing";
}

}  // namespace
}  // namespace gpumem::llm
