// gpumem llm against llama.cpp itself: tests/data/llm/llama_cpp_buffers.json
// holds what llama.cpp (node-llama-cpp 3.21.1, CPU) reported for 128
// contexts over five model shapes (tools/llama_cpp_buffers.mjs). The same
// shapes are written here as sparse GGUF files and read back by gpumem llm,
// whose KV cache must equal llama.cpp's KV buffer, whose weights must equal
// its model buffer, and whose activations must come within 5% of its compute
// buffer, as the issue asks.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <unistd.h>
#include <nlohmann/json.hpp>

#include "gpumem/llm/llm_fit.h"
#include "gpumem/weights/gguf.h"
#include "llm/llama_cpp_recordings.h"
#include "support/llama_gguf.h"
#include "test_paths.h"

namespace gpumem::llm {
namespace {

// A byte count as llama.cpp prints it ("%.2f MiB"): the recording holds
// the printed figure x 1048576, so equal prints are equal figures.
std::string printed(double bytes) { return fmt::format("{:.2f}", bytes / 1048576); }

const nlohmann::json& recorded() { return test::llama_cpp_recording("llama_cpp_buffers.json"); }

LlmPlan plan_for(const nlohmann::json& run) {
  const auto& c = run["context_params"];
  LlmRequest r;
  r.context = c["n_ctx"];
  r.ubatch = c["n_ubatch"];
  r.gpu_bytes = 1ull << 40;
  r.overhead_bytes = 0;
  r.kv_dtype = c["type_k"].get<std::string>() + "," + c["type_v"].get<std::string>();
  r.flash_attention = c["flash_attn"];
  return plan_llm(test::recorded_model(run["shape"]), r);
}

TEST(LlamaCppBuffers, TheRecordingHoldsEveryShapeAndSetting) {
  const auto& doc = recorded();
  ASSERT_EQ(doc["runs"].size(), 128u);
  std::map<std::string, int> per_shape;
  for (const auto& run : doc["runs"]) per_shape[run["shape"]["name"]] += 1;
  EXPECT_EQ(per_shape.size(), 5u);
}

TEST(LlamaCppBuffers, KvCacheEqualsLlamaCppsKvBuffer) {
  for (const auto& run : recorded()["runs"]) {
    const LlmPlan p = plan_for(run);
    SCOPED_TRACE(run["shape"]["name"].get<std::string>() + " " + run["context_params"].dump());
    EXPECT_EQ(p.kv.cells, run["kv_cache"]["cells"].get<uint64_t>());
    EXPECT_EQ(printed(p.kv.k_bytes), printed(run["kv_cache"]["k_bytes"].get<double>()));
    EXPECT_EQ(printed(p.kv.v_bytes), printed(run["kv_cache"]["v_bytes"].get<double>()));
    EXPECT_EQ(printed(p.kv.bytes), printed(run["kv_buffer_bytes"]["CPU"].get<double>()));
  }
}

TEST(LlamaCppBuffers, WeightsEqualLlamaCppsModelBuffer) {
  // With mmap the model buffer is the file's tensor range; a CPU that
  // repacks Q4_K adds a second buffer (tests/data/llm/README.md), so F16 only.
  for (const auto& run : recorded()["runs"]) {
    if (run["shape"]["weight_type"] != "F16") continue;
    const LlmPlan p = plan_for(run);
    SCOPED_TRACE(run["shape"]["name"].get<std::string>());
    EXPECT_EQ(p.model.weight_bytes(), run["gguf"]["tensor_bytes"].get<uint64_t>());
    EXPECT_EQ(printed(p.model.weight_bytes()), printed(run["model_buffer_bytes"]["CPU_Mapped"].get<double>()));
  }
}

TEST(LlamaCppBuffers, ActivationsWithinFivePercentOfLlamaCppsComputeBuffer) {
  double worst = 0;
  std::string worst_run;
  std::vector<double> errors;
  for (const auto& run : recorded()["runs"]) {
    const LlmPlan p = plan_for(run);
    const double theirs = run["compute_buffer_bytes_4dp"]["CPU"].get<double>();
    const double error = (double(p.forward.bytes) - theirs) / theirs;
    SCOPED_TRACE(run["shape"]["name"].get<std::string>() + " " + run["context_params"].dump());
    EXPECT_LE(std::abs(error), 0.05) << "gpumem " << p.forward.bytes << " B at " << p.forward.stage << ", llama.cpp "
                                     << theirs << " B";
    if (std::getenv("GPUMEM_DEBUG_PRINT"))
      std::printf("%s %s %+.2f%% at %s\n", run["shape"]["name"].get<std::string>().c_str(),
                  run["context_params"].dump().c_str(), 100 * error, p.forward.stage.c_str());
    errors.push_back(std::abs(error));
    if (std::abs(error) > std::abs(worst)) {
      worst = error;
      worst_run = run["shape"]["name"].get<std::string>() + " " + run["context_params"].dump();
    }
  }
  std::sort(errors.begin(), errors.end());
  std::printf("activations against llama.cpp's compute buffer, %zu runs: median |error| %.2f%%, worst %+.2f%% (%s)\n",
              errors.size(), 100 * errors[errors.size() / 2], 100 * worst, worst_run.c_str());
}

}  // namespace
}  // namespace gpumem::llm
