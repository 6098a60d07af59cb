// Models from Hugging Face configs and GGUF files: published parameter
// counts, KV bytes per token and llama.cpp's own model buffer recomputed.
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gpumem/common/error.h"
#include "gpumem/llm/llm_fit.h"
#include "gpumem/llm/llm_model.h"
#include "gpumem/weights/gguf.h"
#include "support/llama_gguf.h"
#include "test_paths.h"

namespace gpumem::llm {
namespace {

std::string config_path(const std::string& name) {
  return (test::source_dir() / "tests" / "data" / "llm" / "configs" / (name + ".json")).string();
}

LlmModel config(const std::string& name) { return load_llm_model(config_path(name)); }

uint64_t kv_per_token(const LlmModel& m, const std::string& type = "f16") {
  return kv_cache(m, kv_types(type), 1).bytes_per_token;
}

TEST(LlmModel, PublishedParameterCountsFromTheirConfigs) {
  // Meta's model card: 8,030,261,248 parameters for Llama 3 8B.
  EXPECT_EQ(config("meta-llama-3-8b").parameters(), 8'030'261'248u);
  // transformers' count for Llama-2-7b-hf and Mistral-7B-v0.1.
  EXPECT_EQ(config("llama-2-7b").parameters(), 6'738'415'616u);
  EXPECT_EQ(config("mistral-7b-v0.1").parameters(), 7'241'732'096u);
  // Qwen2 has q, k and v biases: 14.77 B.
  EXPECT_EQ(config("deepseek-r1-distill-qwen-14b").parameters(), 14'770'033'664u);
  // A mixture of experts with q/k norms: the checkpoint's index states
  // total_size 470,187,269,120 bytes of bf16.
  EXPECT_EQ(config("qwen3-235b-a22b").parameters(), 470'187'269'120u / 2);
  // Gemma 2 normalises after attention and after the MLP too: 9.24 B
  // (Google's model card), two norms of 3,584 per layer more than a Llama
  // block of the same shape.
  EXPECT_EQ(config("gemma-2-9b").parameters(), 9'241'705'984u);
}

// Issue 47: T5, BLOOM and Falcon configs got "key num_hidden_layers is
// missing or zero". A family gpumem does not model is named, in one line,
// with what it does model. The configs are the keys the published
// checkpoints' config.json files hold (t5-small, bloom-560m, falcon-7b).
TEST(LlmModel, AFamilyNotModelledIsNamed) {
  const auto refusal = [](const std::string& name, const std::string& text) {
    const std::string path = testing::TempDir() + name + "_config.json";
    { std::ofstream(path) << text; }
    try {
      load_llm_model(path);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string t5 = refusal("t5", R"({"model_type": "t5", "d_model": 512, "num_layers": 6, "num_heads": 8,
      "d_ff": 2048, "vocab_size": 32128, "is_encoder_decoder": true})");
  EXPECT_NE(t5.find("model_type 't5' is an encoder-decoder, which is not modelled yet"), std::string::npos) << t5;
  EXPECT_NE(t5.find("llama"), std::string::npos) << t5;
  const std::string bloom = refusal("bloom", R"({"model_type": "bloom", "n_layer": 24, "hidden_size": 1024,
      "n_head": 16, "vocab_size": 250880})");
  EXPECT_NE(bloom.find("model_type 'bloom' (ALiBi and a two-matrix MLP) is not modelled yet"), std::string::npos)
      << bloom;
  // Falcon's newer config names its layers as Llama's does: refused by name
  // all the same, since a Llama-shaped price would miss its MLP.
  const std::string falcon = refusal("falcon", R"({"model_type": "falcon", "num_hidden_layers": 32,
      "hidden_size": 4544, "num_attention_heads": 71, "vocab_size": 65024})");
  EXPECT_NE(falcon.find("model_type 'falcon'"), std::string::npos) << falcon;
  const std::string unknown = refusal("unknown", R"({"model_type": "xlnet", "n_layer": 24, "d_model": 1024})");
  EXPECT_NE(unknown.find("model_type 'xlnet' is not a family gpumem models yet"), std::string::npos) << unknown;
  for (const auto* m : {&t5, &bloom, &falcon, &unknown}) EXPECT_EQ(m->find('\n'), std::string::npos) << "one line";
}

TEST(LlmModel, KvBytesPerTokenFollowGroupedQueryAttention) {
  // 32 layers x 8 KV heads x 128 dims x 2 x 2 B = 128 KiB: the published figure.
  EXPECT_EQ(kv_per_token(config("meta-llama-3-8b")), 131'072u);
  // Llama 2 7B has as many KV heads as heads: four times that.
  EXPECT_EQ(kv_per_token(config("llama-2-7b")), 524'288u);
  // q8_0 rows: 1024 values in 32 blocks of 34 bytes.
  EXPECT_EQ(kv_per_token(config("meta-llama-3-8b"), "q8_0"), 32u * 2 * 1024 / 32 * 34);
  EXPECT_EQ(kv_per_token(config("meta-llama-3-8b"), "fp8"), 65'536u);
  // K and V apart, as llama.cpp's -ctk q8_0 -ctv f16.
  EXPECT_EQ(kv_per_token(config("meta-llama-3-8b"), "q8_0,f16"), 32u * 1024 / 32 * 34 + 32u * 1024 * 2);
}

TEST(LlmModel, TensorParallelKvMatchesSglangsFigure) {
  // SGLang logged "KV Cache is allocated. #tokens: 367404, K size: 8.23 GB"
  // (GiB) per GPU for Qwen3-235B-A22B at tensor parallel 4
  // (vllm-project/vllm#21348): 4 KV heads, one on each GPU.
  LlmRequest r;
  r.gpu_bytes = 80ull << 30;
  r.gpus = 4;
  r.context = 4096;
  const LlmPlan p = plan_llm(config("qwen3-235b-a22b"), r);
  ASSERT_TRUE(p.multi && p.multi->tensor_parallel_valid);
  const uint64_t k_per_token_per_gpu = p.kv.bytes_per_token / 2 * p.multi->tensor_parallel.kv_bytes / p.kv.bytes;
  EXPECT_EQ(fmt::format("{:.2f}", 367404.0 * k_per_token_per_gpu / (1ull << 30)), "8.23");
}

// Which layers keep a window is llama.cpp's rule per architecture, not the
// config's "sliding_window" alone (issue 31): Mistral 7B v0.1 names a
// window llama.cpp never applies; Gemma 2 windows every other layer; and
// llama.cpp gives windowed layers a cache of their own of window x
// sequences + n_ubatch cells, padded to 256 (llama-kv-cache-iswa.cpp).
TEST(LlmModel, SlidingWindowsFollowLlamaCppsRulePerArchitecture) {
  const LlmModel mistral = config("mistral-7b-v0.1");
  EXPECT_EQ(mistral.sliding_window, 0u);
  EXPECT_NE(mistral.window_rule.find("llama.cpp runs mistral with full attention"), std::string::npos)
      << mistral.window_rule;
  const KvCache at_32k = kv_cache(mistral, kv_types("f16"), 32768);
  EXPECT_EQ(at_32k.windowed_layers, 0u);
  EXPECT_EQ(at_32k.bytes, 32768ull * 131'072);

  // Gemma 2 9B: 42 layers of 8 KV heads x 256 dims, 8 KiB per token per
  // layer at f16; layers 0, 2, 4, ... windowed at 4,096 tokens.
  const LlmModel gemma = config("gemma-2-9b");
  ASSERT_EQ(gemma.swa_layers.size(), 42u);
  EXPECT_TRUE(gemma.layer_is_windowed(0));
  EXPECT_FALSE(gemma.layer_is_windowed(1));
  EXPECT_TRUE(gemma.layer_is_windowed(40));
  EXPECT_FALSE(gemma.layer_is_windowed(41));
  const KvCache g = kv_cache(gemma, kv_types("f16"), 8192, 1, 0, ~0u, 512);
  EXPECT_EQ(g.windowed_layers, 21u);
  EXPECT_EQ(g.cells, 8192u);
  EXPECT_EQ(g.window_cells, 4608u);                          // 4096 + 512
  EXPECT_EQ(g.bytes, (21ull * 8192 + 21ull * 4608) * 8192);  // 2,100 MiB
  // Below the window plus a forward, a windowed layer holds what a whole one does.
  EXPECT_EQ(kv_cache(gemma, kv_types("f16"), 2048, 1, 0, ~0u, 512).bytes, 42ull * 2048 * 8192);
  // Four sequences: the window for each, plus one forward.
  EXPECT_EQ(kv_cache(gemma, kv_types("f16"), 8192, 4, 0, ~0u, 512).window_cells, 4u * 4096 + 512);

  // Qwen2 turns its window off with use_sliding_window: false.
  const LlmModel qwen = config("deepseek-r1-distill-qwen-14b");
  EXPECT_EQ(qwen.sliding_window, 0u);
  // ... and every whole-context layer holds its cells in llama.cpp's steps of 256.
  EXPECT_EQ(kv_cache(qwen, kv_types("f16"), 200000).cells, 200192u);
  EXPECT_EQ(kv_cache(qwen, kv_types("f16"), 200000).bytes, 200192ull * 48 * 8 * 128 * 2 * 2);
}

TEST(LlmModel, LayerTypesAndPatternsSayWhichLayersSlide) {
  const std::string listed = R"({"model_type": "gemma3_text", "num_hidden_layers": 4, "hidden_size": 256,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000,
    "sliding_window": 16, "layer_types": ["sliding_attention", "full_attention", "sliding_attention",
    "full_attention"]})";
  const LlmModel m = model_from_hf_config(listed, "config.json");
  EXPECT_EQ(m.window_rule, "the layers the file lists (layer_types)");
  const KvCache kv = kv_cache(m, kv_types("f16"), 2048, 1, 0, ~0u, 512);
  EXPECT_EQ(kv.windowed_layers, 2u);
  EXPECT_EQ(kv.window_cells, 768u);  // 16 + 512, padded to 256
  EXPECT_EQ(kv.bytes, (2u * 768 + 2u * 2048) * 2 * 128 * 2);

  // Gemma 3 without layer_types: its sliding_window_pattern, else llama.cpp's 6.
  std::string patterned = R"({"model_type": "gemma3_text", "num_hidden_layers": 12, "hidden_size": 256,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000,
    "sliding_window": 16})";
  const LlmModel six = model_from_hf_config(patterned, "config.json");
  EXPECT_EQ(kv_cache(six, kv_types("f16"), 2048).windowed_layers, 10u);  // layers 5 and 11 are global
  EXPECT_FALSE(six.layer_is_windowed(5));
  patterned.insert(patterned.size() - 1, R"(, "sliding_window_pattern": 4)");
  EXPECT_EQ(kv_cache(model_from_hf_config(patterned, "config.json"), kv_types("f16"), 2048).windowed_layers, 9u);

  // An architecture the rules do not know: every layer, as Hugging Face's code, and said so.
  const std::string unknown = R"({"model_type": "newarch", "num_hidden_layers": 2, "hidden_size": 256,
    "num_attention_heads": 4, "intermediate_size": 512, "vocab_size": 1000, "sliding_window": 16})";
  const LlmModel u = model_from_hf_config(unknown, "config.json");
  EXPECT_EQ(kv_cache(u, kv_types("f16"), 2048).windowed_layers, 2u);
  EXPECT_NE(u.window_rule.find("newarch is not in gpumem's table"), std::string::npos) << u.window_rule;
}

// A GGUF file shaped like Llama 3.1 8B at F16, as llama.cpp's convert script
// writes it (norms F32, the rope_freqs table), with holes for data.
std::string write_llama31_gguf(const std::string& path) {
  LlamaShape shape;
  shape.name = "llama-3.1-8b";
  shape.n_layer = 32;
  shape.n_embd = 4096;
  shape.n_head = 32;
  shape.n_head_kv = 8;
  shape.n_ff = 14336;
  shape.n_vocab = 128256;
  shape.n_ctx_train = 131072;
  shape.weight_type = 1;  // F16
  weights::GgufContents c = llama_gguf(shape);
  c.tensors.push_back({"rope_freqs.weight", 0, {64}, {}});
  weights::write_gguf_sparse(path, c);
  return path;
}

TEST(LlmModel, AGgufFileGivesLlamaCppsOwnModelBuffer) {
  const std::string path = write_llama31_gguf(testing::TempDir() + "llama31_8b_f16.gguf");
  const LlmModel m = load_llm_model(path);
  EXPECT_EQ(m.format, "gguf");
  EXPECT_EQ(m.n_layer, 32u);
  EXPECT_EQ(m.n_head_kv, 8u);
  EXPECT_EQ(m.n_vocab, 128256u);
  EXPECT_EQ(m.n_ctx_train, 131072u);
  EXPECT_FALSE(m.tied_embeddings);
  // llama.cpp logged "CPU_Mapped model buffer size = 15317.02 MiB" loading
  // Llama 3.1 8B F16 (ollama/ollama#8361).
  EXPECT_EQ(fmt::format("{:.2f}", m.weight_bytes() / 1048576.0), "15317.02");
  EXPECT_EQ(kv_per_token(m), 131'072u);
  std::filesystem::remove(path);
}

TEST(LlmModel, BadConfigsNameTheFileAndTheKey) {
  EXPECT_THROW(
      {
        try {
          model_from_hf_config(R"({"num_hidden_layers": 2})", "cfg.json");
        } catch (const InputError& e) {
          EXPECT_STREQ(e.what(), "cfg.json: key hidden_size is missing or zero");
          throw;
        }
      },
      InputError);
  EXPECT_THROW(model_from_hf_config("{", "cfg.json"), InputError);
  EXPECT_THROW(model_from_hf_config(R"({"num_hidden_layers": -3})", "cfg.json"), InputError);
  const std::string bad_heads = R"({"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
    "num_key_value_heads": 3, "intermediate_size": 8, "vocab_size": 10})";
  EXPECT_THROW(model_from_hf_config(bad_heads, "cfg.json"), InputError);
  EXPECT_THROW(load_llm_model("/nonexistent/model.gguf"), InputError);
  // Sizes a file claims are bounded before anything is computed from them.
  const std::string huge = R"({"num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
    "intermediate_size": 14336, "vocab_size": 4294967295})";
  EXPECT_THROW(
      {
        try {
          model_from_hf_config(huge, "cfg.json");
        } catch (const InputError& e) {
          EXPECT_STREQ(e.what(), "cfg.json: vocabulary is 4294967295, more than the 4194304 gpumem accepts");
          throw;
        }
      },
      InputError);
  EXPECT_THROW(model_from_hf_config(R"({"num_hidden_layers": 4294967297})", "cfg.json"), InputError);
  // A cache gpumem does not model is refused, not mis-sized.
  EXPECT_THROW(model_from_hf_config(R"({"model_type": "deepseek_v3", "kv_lora_rank": 512})", "cfg.json"), InputError);
}

}  // namespace
}  // namespace gpumem::llm
