// `gpumem llm` as users run it: a config.json or a GGUF file, a GPU size.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"
#include "test_paths.h"

namespace {

using gpumem::test::CliRun;
using gpumem::test::run;

std::string config(const std::string& name) {
  return (gpumem::test::source_dir() / "tests" / "data" / "llm" / "configs" / (name + ".json")).string();
}

TEST(CliLlm, EveryFigureIsExplainedOnItsLine) {
  const CliRun r = run("llm " + config("meta-llama-3-8b") + " --context 8192 --gpu 24GiB");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* expected :
       {"8,030,261,248 parameters: BF16 14.96 GiB",
        "KV cache       1.00 GiB  128.00 KiB per token = 32 layers x 8 KV heads x 128 dims x 2 (K and V) x 2 B",
        "logits = 128256 vocab x 512 tokens x 4 B", "CUDA context and runtime", "FITS", "Longest context",
        "Largest batch", "GPU layers        32 of 32 on one GPU (-ngl 33)", "FITS a GPU of 24.00 GiB: needs "}) {
    EXPECT_NE(r.out.find(expected), std::string::npos) << expected << "\n" << r.out;
  }
}

TEST(CliLlm, JsonHasTheIssuesFieldsAndExit3WhenItDoesNotFit) {
  const CliRun r = run("llm " + config("meta-llama-3-8b") + " --gpu 8GiB --json");
  EXPECT_EQ(r.code, 3) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  for (const char* key : {"fits", "weights_bytes", "kv_bytes_per_token", "kv_bytes", "activation_bytes",
                          "overhead_bytes", "total_bytes", "max_context", "max_batch", "gpu_layers"}) {
    EXPECT_TRUE(doc.contains(key)) << key;
  }
  EXPECT_EQ(doc["fits"], false);
  EXPECT_EQ(doc["kv_bytes_per_token"], 131072);
  EXPECT_EQ(doc["total_bytes"], doc["weights_bytes"].get<uint64_t>() + doc["kv_bytes"].get<uint64_t>() +
                                    doc["activation_bytes"].get<uint64_t>() + doc["overhead_bytes"].get<uint64_t>());
  EXPECT_GT(doc["gpu_layers"].get<int>(), 0);
  EXPECT_LT(doc["gpu_layers"].get<int>(), 32);
}

TEST(CliLlm, BadInputGetsOneLineAndExit2) {
  const CliRun missing = run("llm /nonexistent/config.json --gpu 24GiB");
  EXPECT_EQ(missing.code, 2);
  EXPECT_EQ(missing.err, "gpumem: error: /nonexistent/config.json: no such file or folder\n");
  const CliRun kv = run("llm " + config("meta-llama-3-8b") + " --gpu 24GiB --kv-dtype int3");
  EXPECT_EQ(kv.code, 2);
  EXPECT_NE(kv.err.find("--kv-dtype: 'int3' is not one of"), std::string::npos) << kv.err;
  const CliRun gpu = run("llm " + config("meta-llama-3-8b") + " --gpu lots");
  EXPECT_EQ(gpu.code, 2);
  EXPECT_NE(gpu.err.find("--gpu"), std::string::npos) << gpu.err;
}

}  // namespace

namespace {

// Issue 46: --quant names a format of the engine it is given to; the other
// engine's names are refused, saying whose they are.
TEST(CliLlm, EachEngineTakesItsOwnQuantizations) {
  const std::string llama = config("meta-llama-3-8b");
  const CliRun awq = run("llm " + llama + " --engine vllm --gpu 16GiB --quant awq --json");
  ASSERT_EQ(awq.code, 0) << awq.err;
  const auto doc = nlohmann::json::parse(awq.out);
  EXPECT_TRUE(doc["verdict"]["fits"].get<bool>());
  EXPECT_EQ(doc["quant_levels"].size(), 0u);  // one format chosen
  const CliRun bf16 = run("llm " + llama + " --engine vllm --gpu 16GiB --json");
  EXPECT_EQ(bf16.code, 3);
  const auto levels = nlohmann::json::parse(bf16.out)["quant_levels"];
  ASSERT_EQ(levels.size(), 4u);
  EXPECT_EQ(levels[0]["quant"], "awq");
  EXPECT_EQ(levels[0]["verdict"], doc["verdict"]);  // the same question, the same answer

  const CliRun ggml = run("llm " + llama + " --engine vllm --gpu 16GiB --quant q4_k_m");
  EXPECT_EQ(ggml.code, 2);
  EXPECT_NE(ggml.err.find("awq, gptq, fp8, bitsandbytes"), std::string::npos) << ggml.err;
  const CliRun vllm_name = run("llm " + llama + " --gpu 16GiB --quant awq");
  EXPECT_EQ(vllm_name.code, 2);
  EXPECT_NE(vllm_name.err.find("--engine vllm"), std::string::npos) << vllm_name.err;
}

// Issue 46: Llama-3-8B bf16 on 16 GiB runs with -ngl 33 (the token
// embeddings in host memory, as llama.cpp keeps them): the headline says so.
TEST(CliLlm, TheHeadlineIsWhatLlamaCppRuns) {
  const CliRun r = run("llm " + config("meta-llama-3-8b") + " --gpu 16GiB --context 8k");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Verdict     FITS a GPU of 16.00 GiB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(-ngl 33)"), std::string::npos) << r.out;
  const CliRun small = run("llm " + config("meta-llama-3-8b") + " --gpu 12GiB --context 8k");
  EXPECT_EQ(small.code, 3);
  EXPECT_NE(small.out.find("quantized it runs: --quant q8_0"), std::string::npos) << small.out;
  const CliRun ollama = run("llm " + config("meta-llama-3-8b") + " --gpu 8GiB --engine ollama");
  EXPECT_NE(ollama.out.find("num_gpu 33"), std::string::npos) << ollama.out;
  EXPECT_NE(ollama.out.find("priced as q4_k_m"), std::string::npos) << ollama.out;
}

}  // namespace
