// gpumem llm --engine llama.cpp@bNNNN against what each llama.cpp release
// itself allocated: tests/data/llm/llama_cpp_versions.json holds, for every
// node-llama-cpp release from 3.1.1 (llama.cpp b3889, October 2024) to the
// newest, the KV cache and compute buffer of four shapes at three contexts,
// two micro-batch sizes, with and without flash attention, and quantized
// caches where the release can set them (tools/llama_cpp_versions.mjs). The
// rows of the llama.cpp table (src/llm/engines.cpp) come from these
// recordings; each release is checked with its own row.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gpumem/common/error.h"
#include "gpumem/llm/engines.h"
#include "gpumem/llm/llm_fit.h"
#include "llama_cpp_recordings.h"

namespace gpumem::llm {
namespace {

const nlohmann::json& versions() { return test::llama_cpp_recording("llama_cpp_versions.json")["versions"]; }

// The engine spec of a recorded release: its build ("b4234"); the newest
// node-llama-cpp names a release tag instead ("v0.4.0"), past every build.
std::string engine_of(const nlohmann::json& v) {
  const std::string release = v["llama_cpp_release"];
  return release.starts_with("b") ? "llama.cpp@" + release : "llama.cpp";
}

bool flash_taken(const nlohmann::json& run) {
  const auto& f = run["llama_context"]["flash_attn"];
  return f.is_boolean() ? f.get<bool>() : f.is_number() ? f.get<int>() != 0 : f.get<std::string>() == "enabled";
}

LlmPlan plan_for(const nlohmann::json& run, const EngineRules& engine) {
  const auto& c = run["llama_context"];
  LlmRequest r;
  r.context = run["context_params"]["n_ctx"];
  r.ubatch = c["n_ubatch"];
  r.gpu_bytes = 1ull << 40;
  r.overhead_bytes = 0;
  r.kv_dtype = c["type_k"].get<std::string>() + "," + c["type_v"].get<std::string>();
  r.flash_attention = flash_taken(run);
  r.engine = engine;
  return plan_llm(test::recorded_model(run["shape"]), r);
}

std::string describe(const nlohmann::json& v, const nlohmann::json& run) {
  const auto& c = run["llama_context"];
  return fmt::format("{} {} n_ctx {} ubatch {} {} {}/{}", v["llama_cpp_release"].get<std::string>(),
                     run["shape"]["name"].get<std::string>(), run["context_params"]["n_ctx"].dump(),
                     c["n_ubatch"].dump(), flash_taken(run) ? "fa" : "no-fa", c["type_k"].get<std::string>(),
                     c["type_v"].get<std::string>());
}

TEST(LlamaCppVersions, KvCacheIsEachReleasesOwn) {
  int compared = 0;
  for (const auto& v : versions()) {
    const EngineRules e = engine_rules(engine_of(v));
    for (const auto& run : v["runs"]) {
      SCOPED_TRACE(describe(v, run));
      const LlmPlan p = plan_for(run, e);
      EXPECT_EQ(p.kv.cells, run["kv"]["cells"].get<uint64_t>());
      if (!run["kv"]["swa"].is_null()) EXPECT_EQ(p.kv.window_cells, run["kv"]["swa"]["cells"].get<uint64_t>());
      // Printed to 0.01 MiB.
      EXPECT_NEAR(static_cast<double>(p.kv.bytes), run["kv"]["bytes"].get<double>(), 5243.0 * 2);
      ++compared;
    }
  }
  EXPECT_GE(compared, 100);
}

// The issue's goal is 1% median and 3% worst. The median is met on every
// release; 17 of 282 runs are beyond 3%: Llama-3 8B with flash attention
// at 8,192 cells before b8095 (7 runs at -3.00 to -3.01%: the mask beside
// the logits), flash attention at 8,192 cells on b6122 and b8095, where the
// allocator placed the mask elsewhere (4 runs, -6.6% to +12.4%), and a q8_0
// cache with flash attention on the newest (6 runs, +-4%).
// docs/llm.md lists them.
TEST(LlamaCppVersions, ComputeBufferWithinOnePercentMedian) {
  std::vector<double> errors;
  double worst = 0;
  std::string worst_run;
  for (const auto& v : versions()) {
    const EngineRules e = engine_rules(engine_of(v));
    std::vector<double> per_release;
    for (const auto& run : v["runs"]) {
      const LlmPlan p = plan_for(run, e);
      const double theirs = run["compute_buffer_bytes"].get<double>();
      const double error = (static_cast<double>(p.forward.bytes) - theirs) / theirs;
      std::printf("  %-60s gpumem %11llu llama.cpp %11.0f %+6.2f%%\n", describe(v, run).c_str(),
                  static_cast<unsigned long long>(p.forward.bytes), theirs, 100 * error);
      errors.push_back(std::fabs(error));
      per_release.push_back(std::fabs(error));
      if (std::fabs(error) > std::fabs(worst)) {
        worst = error;
        worst_run = describe(v, run);
      }
    }
    std::sort(per_release.begin(), per_release.end());
    std::printf("%s (%s): %zu runs, median |error| %.2f%%, worst %.2f%%\n", engine_of(v).c_str(), e.releases.c_str(),
                per_release.size(), 100 * per_release[per_release.size() / 2], 100 * per_release.back());
  }
  std::sort(errors.begin(), errors.end());
  const double median = errors[errors.size() / 2];
  std::printf("every release: %zu runs, median |error| %.2f%%, worst %+.2f%% (%s)\n", errors.size(), 100 * median,
              100 * worst, worst_run.c_str());
  EXPECT_LE(median, 0.01);
  const auto beyond = std::count_if(errors.begin(), errors.end(), [](double e) { return e > 0.03; });
  EXPECT_LE(beyond, 17) << "runs beyond 3%";
  EXPECT_LE(std::fabs(worst), 0.13) << worst_run;
}

TEST(LlamaCppVersions, TheDefaultRulesAreTheNewestRelease) {
  const EngineRules newest = engine_rules("llama.cpp"), fresh;
  EXPECT_EQ(newest.ctx_padding, fresh.ctx_padding);
  EXPECT_EQ(newest.ctx_padding_no_flash, fresh.ctx_padding_no_flash);
  EXPECT_EQ(newest.window_cache, fresh.window_cache);
  EXPECT_EQ(newest.graph.output_halves, fresh.graph.output_halves);
  EXPECT_EQ(newest.graph.attention_halves_delta, 0);
  EXPECT_EQ(newest.graph.ffn_ff_halves_delta, 0);
  EXPECT_EQ(newest.graph.ffn_embd_halves_delta, 0);
  EXPECT_EQ(newest.graph.rotated_quantized_cache, fresh.graph.rotated_quantized_cache);
  // A build between two measured ones takes the older one's rules.
  EXPECT_FALSE(engine_rules("llama.cpp@b5000").window_cache);
  EXPECT_TRUE(engine_rules("llama.cpp@5590").window_cache);
  EXPECT_EQ(engine_rules("llama.cpp@b8000").ctx_padding_no_flash, 32u);
}

TEST(LlamaCppVersions, AnUnknownReleaseListsTheKnownOnes) {
  try {
    engine_rules("llama.cpp@b100");
    FAIL() << "b100 is older than every measured release";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("llama.cpp@b3889"), std::string::npos) << e.what();
  }
  EXPECT_THROW(engine_rules("llama.cpp@latest"), InputError);
  EXPECT_THROW(engine_rules("tgi"), InputError);
}

}  // namespace
}  // namespace gpumem::llm
