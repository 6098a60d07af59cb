// Sliding windows against llama.cpp itself: tests/data/llm/llama_cpp_swa.json
// holds the two KV caches llama.cpp (node-llama-cpp 3.21.1, CPU) made for
// Gemma 2 2B and 9B shapes at five contexts (tools/llama_cpp_swa.mjs): one
// for the whole-context layers, one for the windowed layers. The same shapes
// written here as sparse GGUFs and read back by gpumem llm must give the
// same layers, cells and bytes (issue 31).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gpumem/llm/llm_memory.h"
#include "llm/llama_cpp_recordings.h"

namespace gpumem::llm {
namespace {

TEST(LlamaCppWindows, BothCachesAreLlamaCppsOwn) {
  const auto& runs = test::llama_cpp_recording("llama_cpp_swa.json")["runs"];
  ASSERT_EQ(runs.size(), 10u);
  for (const auto& run : runs) {
    const LlmModel& m = test::recorded_model(run["shape"]);
    const uint64_t n_ctx = run["n_ctx"], n_ubatch = run["n_ubatch"];
    SCOPED_TRACE(fmt::format("{} n_ctx {} n_ubatch {}", m.source, n_ctx, n_ubatch));
    const KvCache kv = kv_cache(m, kv_types("f16"), n_ctx, 1, 0, ~0u, n_ubatch);
    const auto& whole = run["caches"][0];
    const auto& windowed = run["caches"][1];
    ASSERT_EQ(whole["kind"], "non-SWA");
    ASSERT_EQ(windowed["kind"], "SWA");
    EXPECT_EQ(m.n_layer - kv.windowed_layers, whole["layers"].get<uint32_t>());
    EXPECT_EQ(kv.windowed_layers, windowed["layers"].get<uint32_t>());
    EXPECT_EQ(kv.cells, whole["cells"].get<uint64_t>());
    EXPECT_EQ(kv.window_cells, windowed["cells"].get<uint64_t>());
    // Bytes: every layer's row is the same, so each cache is its share.
    const uint64_t per_cell_per_layer = kv.bytes_per_token / m.n_layer;
    EXPECT_EQ(per_cell_per_layer * kv.cells * (m.n_layer - kv.windowed_layers), whole["bytes"].get<uint64_t>());
    EXPECT_EQ(per_cell_per_layer * kv.window_cells * kv.windowed_layers, windowed["bytes"].get<uint64_t>());
    EXPECT_EQ(kv.bytes, whole["bytes"].get<uint64_t>() + windowed["bytes"].get<uint64_t>());
  }
}

}  // namespace
}  // namespace gpumem::llm
