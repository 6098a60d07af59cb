// gpumem llm --engine vllm against vLLM's own start-up logs, collected from
// public issues (tests/data/llm/public/vllm_logs.json, each with its
// source). Two questions apart: given the memory vLLM measured outside
// PyTorch on that machine (printed in the log), does gpumem reproduce the
// block count (the weights with their rotary cache, the profile run's peak,
// vLLM's arithmetic)? And with gpumem's default for that memory, how far off
// is the prediction a user gets before starting vLLM?
#include <cmath>
#include <cstdio>

#include <gtest/gtest.h>

#include "gpumem/llm/engines.h"
#include "gpumem/llm/vllm_sizing.h"
#include "llama_cpp_recordings.h"
#include "test_paths.h"

namespace gpumem::llm {
namespace {

struct Case {
  const char* id;
  const char* config;  // tests/data/llm/configs/CONFIG.json: the model the log names
  const char* engine;  // the version the log's format pins
  double gpu_gib;      // as the log prints it (0: the log's own)
};

// Logs whose GPU, utilization, context and block count are all known.
constexpr Case kCases[] = {
    {"vllm10517-llama31-8b-rtx3090-20k", "llama-3.1-8b", "vllm@0.6.4", 0},
    {"vllm10517-llama31-8b-rtx3090-29k", "llama-3.1-8b", "vllm@0.6.4", 0},
    {"oci-aqua-v0.7-llama31-8b-a10-131k", "llama-3.1-8b", "vllm@0.7.0", 0},
};

const nlohmann::json& log_of(const std::string& id) {
  for (const auto& l : test::llama_cpp_recording("public/vllm_logs.json")["logs"])
    if (l["id"] == id) return l;
  throw std::runtime_error("no log " + id);
}

VllmSizing size(const Case& c, std::optional<uint64_t> non_torch) {
  const auto& l = log_of(c.id);
  const auto path =
      gpumem::test::source_dir() / "tests" / "data" / "llm" / "configs" / (std::string(c.config) + ".json");
  VllmRequest r;
  const double gib = c.gpu_gib != 0 ? c.gpu_gib : l["figures"]["total_gpu_gib"].get<double>();
  r.gpu_bytes = static_cast<uint64_t>(gib * (1ull << 30));
  r.gpu_memory_utilization = l["config"]["gpu_memory_utilization"];
  r.max_model_len = l["config"]["max_model_len"];
  r.non_torch_bytes = non_torch;
  return size_vllm(load_llm_model(path.string()), r, engine_rules(c.engine));
}

double error_of(const Case& c, const VllmSizing& s) {
  const double logged = log_of(c.id)["figures"]["num_gpu_blocks"];
  return (static_cast<double>(s.num_gpu_blocks) - logged) / logged;
}

TEST(VllmLogs, WithTheMeasuredNonTorchMemoryTheBlocksAreVllms) {
  for (const Case& c : kCases) {
    const double non_torch_gib = log_of(c.id)["figures"]["non_torch_gib"];
    const VllmSizing s = size(c, static_cast<uint64_t>(non_torch_gib * (1ull << 30)));
    // The log prints each part to 0.01 GiB: 5 blocks of 2 MiB either way.
    EXPECT_LT(std::fabs(error_of(c, s)), 0.005) << c.id << ": " << s.num_gpu_blocks << " blocks";
    EXPECT_EQ(s.kv_tokens, s.num_gpu_blocks * 16) << c.id;
  }
}

TEST(VllmLogs, PredictedWithTheDefaultNonTorchMemory) {
  // Not the 2% (the memory outside PyTorch differs by machine,
  // 0.05 to 0.35 GiB in these logs); docs/llm.md lists the errors.
  for (const Case& c : kCases) {
    const VllmSizing s = size(c, std::nullopt);
    std::printf("%-36s %5llu blocks predicted, %+.1f%%\n", c.id, static_cast<unsigned long long>(s.num_gpu_blocks),
                100 * error_of(c, s));
    EXPECT_LT(std::fabs(error_of(c, s)), 0.06) << c.id;
  }
}

TEST(VllmLogs, TheBlockIsVllmsAndConcurrencyFollows) {
  // Llama-3 8B: 16 tokens x 2 (K, V) x 8 KV heads x 128 dims x 2 B = 64 KiB
  // a layer (CacheEngine.get_cache_block_size x 32 layers = 2 MiB).
  const Case c = kCases[0];
  const VllmSizing s = size(c, 350ull << 20);
  EXPECT_EQ(s.page_bytes, 65536u);
  EXPECT_EQ(s.blocks_per_request, 32u * 1250);  // 20,000 tokens in 1,250 blocks, every layer
  EXPECT_NEAR(s.max_concurrency, static_cast<double>(s.kv_tokens) / 20000, 1e-9);
  // The log's 1.56x
  EXPECT_NEAR(s.max_concurrency, log_of(c.id)["figures"]["max_concurrency"].get<double>(), 0.01);
}

// Logs that print the KV cache memory vLLM was left with but not the
// memory around it: the step from bytes to tokens (pages per layer, whole
// blocks), checked on two more models. The log rounds the memory to 0.01
// GiB, so the tokens agree within that.
TEST(VllmLogs, FromTheLoggedKvMemoryTheTokensAreVllms) {
  const std::pair<const char*, const char*> logs[] = {{"lmcache1739-v0.10.2-qwen3-14b-a100-40gb", "qwen3-14b"},
                                                      {"vllm33263-qwen3-1.7b-24gb-seqs1-len1024", "qwen3-1.7b"}};
  for (const auto& [id, config] : logs) {
    const auto& l = log_of(id);
    const auto path =
        gpumem::test::source_dir() / "tests" / "data" / "llm" / "configs" / (std::string(config) + ".json");
    const LlmModel m = load_llm_model(path.string());
    VllmRequest r;
    r.gpu_bytes = 80ull << 30;
    r.max_model_len = l["config"]["max_model_len"];
    const VllmSizing s = size_vllm(m, r, engine_rules("vllm@0.10.2"));
    const double kv_bytes = l["figures"]["kv_cache_gib"].get<double>() * (1ull << 30);
    const uint64_t blocks = static_cast<uint64_t>(kv_bytes / static_cast<double>(s.page_bytes * m.n_layer));
    const double logged = l["figures"]["kv_cache_tokens"];
    const double ours = static_cast<double>(blocks * r.block_size);
    std::printf("%-44s %8.0f tokens, vLLM %8.0f (%+.2f%%)\n", id, ours, logged, 100 * (ours - logged) / logged);
    EXPECT_LT(std::fabs(ours - logged) / logged, 0.001) << id;
  }
}

TEST(VllmLogs, UnknownVersionsListWhatIsKnown) {
  try {
    engine_rules("vllm@0.3.0");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("vllm@0.4.0 and later"), std::string::npos) << e.what();
  }
  EXPECT_THROW(engine_rules("tgi"), InputError);
  EXPECT_THROW(engine_rules("llama.cpp@bxyz"), InputError);
  EXPECT_TRUE(engine_rules("vllm@0.21.3").vllm_graphs_profiled);
  EXPECT_FALSE(engine_rules("vllm@0.20.9").vllm_graphs_profiled);
  EXPECT_FALSE(engine_rules("vllm@0.7.3").vllm_v1);
}

}  // namespace
}  // namespace gpumem::llm
