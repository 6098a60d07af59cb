// Which type each tensor gets: llama.cpp's llama-quantize rules
// (src/llama-quant.cpp) on model shapes, with the expected sets worked out
// by hand from those rules.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpumem/common/error.h"
#include "gpumem/weights/gguf.h"
#include "gpumem/weights/quantize_file.h"

namespace gpumem::weights {
namespace {

std::vector<TensorShape> llama(int layers, bool with_output = true, uint64_t dim = 4096, uint64_t ffn = 11008) {
  std::vector<TensorShape> t = {{"token_embd.weight", "F16", {dim, 32000}}};
  for (int l = 0; l < layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    t.push_back({p + "attn_norm.weight", "F32", {dim}});
    t.push_back({p + "attn_q.weight", "F16", {dim, dim}});
    t.push_back({p + "attn_k.weight", "F16", {dim, dim / 4}});
    t.push_back({p + "attn_v.weight", "F16", {dim, dim / 4}});
    t.push_back({p + "attn_output.weight", "F16", {dim, dim}});
    t.push_back({p + "ffn_gate.weight", "F16", {dim, ffn}});
    t.push_back({p + "ffn_up.weight", "F16", {dim, ffn}});
    t.push_back({p + "ffn_down.weight", "F16", {ffn, dim}});
  }
  t.push_back({"output_norm.weight", "F32", {dim}});
  if (with_output) t.push_back({"output.weight", "F16", {dim, 32000}});
  return t;
}

std::map<std::string, std::string> types(const std::vector<TensorShape>& tensors, const QuantizeOptions& options,
                                         const ModelHints& hints = {}) {
  const auto choices = choose_types(tensors, hints, options);
  std::map<std::string, std::string> out;
  for (size_t i = 0; i < tensors.size(); ++i) out[tensors[i].name] = std::string(ggml_type(choices[i].type)->name);
  return out;
}

std::set<std::string> named(const std::map<std::string, std::string>& t, const std::string& type) {
  std::set<std::string> out;
  for (const auto& [name, ty] : t)
    if (ty == type) out.insert(name);
  return out;
}

QuantizeOptions type(const std::string& name) {
  QuantizeOptions o;
  o.type = name;
  return o;
}

TEST(QuantizeRules, Q4KMOnA32LayerLlamaRaisesHalfTheLayersAttnVAndFfnDown) {
  const auto t = types(llama(32), type("q4_k_m"), {"llama", 32, 0, false});
  // use_more_bits(i, 32): i < 4, i >= 28, (i - 4) % 3 == 2.
  std::set<std::string> expected = {"output.weight"};
  for (const int l : {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31}) {
    expected.insert("blk." + std::to_string(l) + ".attn_v.weight");
    expected.insert("blk." + std::to_string(l) + ".ffn_down.weight");
  }
  EXPECT_EQ(named(t, "Q6_K"), expected);
  EXPECT_EQ(t.at("token_embd.weight"), "Q4_K");
  EXPECT_EQ(t.at("blk.5.ffn_up.weight"), "Q4_K");
  EXPECT_EQ(t.at("blk.5.attn_norm.weight"), "F32");
  EXPECT_EQ(named(t, "F32").size(), 33u);
  // The input's order does not matter: llama.cpp's counters follow layers.
  auto reversed = llama(32);
  std::reverse(reversed.begin(), reversed.end());
  EXPECT_EQ(named(types(reversed, type("q4_k_m"), {"llama", 32, 0, false}), "Q6_K"), expected);
}

TEST(QuantizeRules, TiedEmbeddingsTakeTheOutputsType) {
  // No output.weight: token_embd.weight is the output, in Q6_K.
  EXPECT_EQ(types(llama(4, false), type("q4_k_m")).at("token_embd.weight"), "Q6_K");
  EXPECT_EQ(types(llama(4, false), type("q4_0")).at("token_embd.weight"), "Q6_K");
  EXPECT_EQ(types(llama(4, false), type("q8_0")).at("token_embd.weight"), "Q8_0");
  auto pure = type("q4_0");
  pure.pure = true;
  EXPECT_EQ(types(llama(4, false), pure).at("token_embd.weight"), "Q4_0");
}

TEST(QuantizeRules, HuggingFaceNamesCountAsTheSameTensors) {
  std::vector<TensorShape> t = {{"model.embed_tokens.weight", "BF16", {2048, 32000}},
                                {"lm_head.weight", "BF16", {2048, 32000}},
                                {"model.norm.weight", "BF16", {2048}}};
  for (int l = 0; l < 8; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    t.push_back({p + "self_attn.v_proj.weight", "BF16", {2048, 512}});
    t.push_back({p + "mlp.down_proj.weight", "BF16", {5632, 2048}});
    t.push_back({p + "mlp.up_proj.weight", "BF16", {2048, 5632}});
  }
  const auto got = types(t, type("q4_k_m"));
  std::set<std::string> expected = {"lm_head.weight"};
  for (const int l : {0, 3, 6, 7}) {
    expected.insert("model.layers." + std::to_string(l) + ".self_attn.v_proj.weight");
    expected.insert("model.layers." + std::to_string(l) + ".mlp.down_proj.weight");
  }
  EXPECT_EQ(named(got, "Q6_K"), expected);
  EXPECT_EQ(got.at("model.norm.weight"), "BF16");  // 1-D: kept as it is
}

TEST(QuantizeRules, WhatLlamaCppNeverQuantizes) {
  const std::vector<TensorShape> t = {
      {"blk.0.ffn_gate_inp.weight", "F32", {4096, 8}}, {"position_embd.weight", "F32", {768, 512}},
      {"blk.0.ssm_conv1d.weight", "F32", {4, 1536}},   {"blk.0.attn_q.bias", "F32", {4096, 2}},  // not a weight
      {"blk.0.attn_q.weight", "F32", {4096, 1}},                                                 // ggml_n_dims 1
      {"blk.0.attn_k.weight", "F32", {4096, 1, 2}}};
  const auto got = types(t, type("q8_0"));
  EXPECT_EQ(got.at("blk.0.ffn_gate_inp.weight"), "F32");
  EXPECT_EQ(got.at("position_embd.weight"), "F32");
  EXPECT_EQ(got.at("blk.0.ssm_conv1d.weight"), "F32");
  EXPECT_EQ(got.at("blk.0.attn_q.bias"), "F32");
  EXPECT_EQ(got.at("blk.0.attn_q.weight"), "F32");
  EXPECT_EQ(got.at("blk.0.attn_k.weight"), "Q8_0");
  // ONNX names weights as it likes: the name need not end in 'weight'.
  EXPECT_EQ(types(t, type("q8_0"), {"", 0, 0, true}).at("blk.0.attn_q.bias"), "Q8_0");
}

TEST(QuantizeRules, Fallbacks) {
  const std::vector<TensorShape> t = {{"a.weight", "F32", {2880, 64}},  // 2880 = 11.25 x 256, 90 x 32
                                      {"b.weight", "F32", {100, 64}},   // not a multiple of 32
                                      {"output.weight", "F32", {2880, 64}},
                                      {"blk.0.attn_qkv.weight", "F32", {4096, 64}}};
  const auto q4km = types(t, type("q4_k_m"));
  EXPECT_EQ(q4km.at("a.weight"), "Q5_0");
  EXPECT_EQ(q4km.at("b.weight"), "F16");
  EXPECT_EQ(q4km.at("output.weight"), "Q8_0");  // rows not a multiple of 256: Q8_0
  // attn_qkv counts as attn_v: use_more_bits(0, 1).
  EXPECT_EQ(q4km.at("blk.0.attn_qkv.weight"), "Q6_K");
  const auto q5km = types(t, type("q5_k_m"));
  EXPECT_EQ(q5km.at("a.weight"), "Q5_1");  // Q5_K's fallback
  EXPECT_EQ(q5km.at("b.weight"), "F16");
  EXPECT_EQ(q5km.at("output.weight"), "Q8_0");
  EXPECT_EQ(q5km.at("blk.0.attn_qkv.weight"), "Q6_K");
  const auto q6k = types(t, type("q6_k"));
  EXPECT_EQ(q6k.at("a.weight"), "Q8_0");                    // llama.cpp's own fallback
  EXPECT_EQ(types(t, type("q8_0")).at("b.weight"), "F16");  // llama.cpp at 007dbbf3 stops here
  EXPECT_EQ(types(t, type("q5_0")).at("b.weight"), "F16");
  const auto choices = choose_types(t, {}, type("q4_k_m"));
  EXPECT_NE(choices[0].why.find("fallback Q5_0"), std::string::npos) << choices[0].why;
}

TEST(QuantizeRules, FusedAttnQkvCountsAsAttnV) {
  // llama.cpp's own branch for attn_qkv (Q5_K in Q4_K_M) is never reached:
  // attn_qkv takes attn_v's rules, use_more_bits included.
  std::vector<TensorShape> t;
  for (int l = 0; l < 8; ++l) t.push_back({"blk." + std::to_string(l) + ".attn_qkv.weight", "F16", {4096, 12288}});
  const std::set<std::string> raised = {"blk.0.attn_qkv.weight", "blk.3.attn_qkv.weight", "blk.6.attn_qkv.weight",
                                        "blk.7.attn_qkv.weight"};
  const auto q4km = types(t, type("q4_k_m"), {"phi2", 8, 0, false});
  EXPECT_EQ(named(q4km, "Q6_K"), raised);
  EXPECT_EQ(named(q4km, "Q4_K").size(), 4u);
  const auto q5km = types(t, type("q5_k_m"), {"phi2", 8, 0, false});
  EXPECT_EQ(named(q5km, "Q6_K"), raised);
  EXPECT_EQ(named(q5km, "Q5_K").size(), 4u);
  const auto q4ks = types(t, type("q4_k_s"), {"phi2", 8, 0, false});
  EXPECT_EQ(named(q4ks, "Q5_K").size(), 4u);  // the first 4
  EXPECT_EQ(q4ks.at("blk.4.attn_qkv.weight"), "Q4_K");
}

TEST(QuantizeRules, Q5KMRaisesTheTensorsQ4KMRaisesToQ6K) {
  const auto t = types(llama(32), type("q5_k_m"), {"llama", 32, 0, false});
  std::set<std::string> expected = {"output.weight"};
  for (const int l : {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31}) {
    expected.insert("blk." + std::to_string(l) + ".attn_v.weight");
    expected.insert("blk." + std::to_string(l) + ".ffn_down.weight");
  }
  EXPECT_EQ(named(t, "Q6_K"), expected);
  EXPECT_EQ(named(t, "Q5_K").size(), 1 + 32 * 7 - 32u);  // token_embd and every other matrix
  EXPECT_EQ(t.at("blk.4.ffn_down.weight"), "Q5_K");
  EXPECT_EQ(named(t, "F32").size(), 33u);
}

TEST(QuantizeRules, Q4KSRaisesTheFirstEighthsFfnDownAndTheFirstFourAttnV) {
  const auto t = types(llama(32), type("q4_k_s"), {"llama", 32, 0, false});
  std::set<std::string> expected;
  for (const int l : {0, 1, 2, 3}) {  // i < 32 / 8; attn_v: the first 4 counted
    expected.insert("blk." + std::to_string(l) + ".attn_v.weight");
    expected.insert("blk." + std::to_string(l) + ".ffn_down.weight");
  }
  EXPECT_EQ(named(t, "Q5_K"), expected);
  EXPECT_EQ(named(t, "Q6_K"), (std::set<std::string>{"output.weight"}));
  EXPECT_EQ(t.at("blk.4.attn_v.weight"), "Q4_K");
  EXPECT_EQ(t.at("blk.31.ffn_down.weight"), "Q4_K");
  // On 8 layers the first eighth is layer 0 alone; attn_v still counts 4.
  const auto small = types(llama(8), type("q4_k_s"), {"llama", 8, 0, false});
  EXPECT_EQ(named(small, "Q5_K"),
            (std::set<std::string>{"blk.0.ffn_down.weight", "blk.0.attn_v.weight", "blk.1.attn_v.weight",
                                   "blk.2.attn_v.weight", "blk.3.attn_v.weight"}));
  // Falcon keeps its ffn_down at Q4_K (and its output at Q8_0).
  const auto falcon = types(llama(8), type("q4_k_s"), {"falcon", 8, 0, false});
  EXPECT_EQ(falcon.at("blk.0.ffn_down.weight"), "Q4_K");
  EXPECT_EQ(falcon.at("blk.0.attn_v.weight"), "Q5_K");
  EXPECT_EQ(falcon.at("output.weight"), "Q8_0");
  // A 70B raises every other attn_v from Q4_K to Q5_K.
  const auto big = types(llama(80, true, 8192, 28672), type("q4_k_s"), {"llama", 80, 0, false, true});
  for (int l = 0; l < 80; ++l) EXPECT_EQ(big.at("blk." + std::to_string(l) + ".attn_v.weight"), "Q5_K") << l;
  EXPECT_EQ(big.at("blk.40.ffn_down.weight"), "Q4_K");
}

TEST(QuantizeRules, Q5KSQ5_0AndQ5_1RaiseOnlyTheOutput) {
  for (const auto& [name, ggml] :
       std::vector<std::pair<std::string, std::string>>{{"q5_k_s", "Q5_K"}, {"q5_0", "Q5_0"}, {"q5_1", "Q5_1"}}) {
    const auto t = types(llama(32), type(name), {"llama", 32, 0, false});
    EXPECT_EQ(named(t, "Q6_K"), (std::set<std::string>{"output.weight"})) << name;
    EXPECT_EQ(named(t, ggml).size(), 1 + 32 * 7u) << name;
    // Tied embeddings: token_embd is the output.
    EXPECT_EQ(types(llama(4, false), type(name)).at("token_embd.weight"), "Q6_K") << name;
    // 8 experts: attn_v and attn_k in Q8_0, attn_output left alone.
    const std::vector<TensorShape> moe = {{"blk.0.attn_v.weight", "F16", {4096, 1024}},
                                          {"blk.0.attn_k.weight", "F16", {4096, 1024}},
                                          {"blk.0.attn_output.weight", "F16", {4096, 4096}}};
    const auto m = types(moe, type(name), {"llama", 32, 8, false});
    EXPECT_EQ(m.at("blk.0.attn_v.weight"), "Q8_0") << name;
    EXPECT_EQ(m.at("blk.0.attn_k.weight"), "Q8_0") << name;
    EXPECT_EQ(m.at("blk.0.attn_output.weight"), ggml) << name;
  }
  // An output whose rows are a multiple of 32 but not of 256: Q8_0.
  EXPECT_EQ(types({{"output.weight", "F32", {2880, 64}}}, type("q5_0")).at("output.weight"), "Q8_0");
}

TEST(QuantizeRules, FileTypesAreLlamaCpps) {
  // LLAMA_FTYPE_* of include/llama.h.
  const std::map<std::string, uint32_t> expected = {
      {"q8_0", 7},    {"q6_k", 18}, {"q5_k_m", 17}, {"q5_k_s", 16}, {"q5_1", 9},  {"q5_0", 8}, {"q4_k_m", 15},
      {"q4_k_s", 14}, {"q4_k", 15}, {"q4_0", 2},    {"f16", 1},     {"bf16", 32}, {"f32", 0}};
  ASSERT_EQ(quantize_recipes().size(), expected.size());
  for (const auto& r : quantize_recipes()) EXPECT_EQ(r.file_type, expected.at(std::string(r.name))) << r.name;
  EXPECT_EQ(quantize_recipe_named("Q5_K_M"), quantize_recipe_named("q5_k_m"));
}

TEST(QuantizeRules, EightExpertsAndSeventyBillion) {
  std::vector<TensorShape> t = {
      {"blk.0.attn_v.weight", "F16", {4096, 1024}},      {"blk.0.attn_k.weight", "F16", {4096, 1024}},
      {"blk.0.attn_output.weight", "F16", {4096, 4096}}, {"blk.0.ffn_down_exps.weight", "F16", {14336, 4096, 8}},
      {"blk.5.attn_v.weight", "F16", {4096, 1024}},      {"blk.5.ffn_down_exps.weight", "F16", {14336, 4096, 8}}};
  const auto mixtral = types(t, type("q4_k_m"), {"llama", 32, 8, false});
  EXPECT_EQ(mixtral.at("blk.0.attn_v.weight"), "Q8_0");
  EXPECT_EQ(mixtral.at("blk.0.attn_k.weight"), "Q8_0");
  EXPECT_EQ(mixtral.at("blk.0.attn_output.weight"), "Q5_K");
  // Experts: ffn_down's layer comes from its name: use_more_bits(0, 32), not (5, 32).
  EXPECT_EQ(mixtral.at("blk.0.ffn_down_exps.weight"), "Q6_K");
  EXPECT_EQ(mixtral.at("blk.5.ffn_down_exps.weight"), "Q4_K");
  // attn_v counts 2 tensors: use_more_bits(0, 2) is false, (1, 2) true. A
  // 70B (Llama with 80 layers) raises the first from Q4_K to Q5_K.
  EXPECT_EQ(types(t, type("q4_k_m"), {"llama", 32, 0, false}).at("blk.0.attn_v.weight"), "Q4_K");
  EXPECT_EQ(types(t, type("q4_k_m"), {"llama", 32, 0, false}).at("blk.5.attn_v.weight"), "Q6_K");
  EXPECT_EQ(types(t, type("q4_k_m"), {"llama", 80, 0, false, true}).at("blk.0.attn_v.weight"), "Q5_K");
  // Q4_K_S raises attn_output of 8 experts too.
  EXPECT_EQ(types(t, type("q4_k_s"), {"llama", 32, 8, false}).at("blk.0.attn_output.weight"), "Q5_K");
}

TEST(QuantizeRules, BadTypesAndDtypes) {
  const std::vector<TensorShape> t = {{"a.weight", "F32", {256, 4}}};
  EXPECT_THROW(choose_types(t, {}, type("q3_k_m")), InputError);  // a llama.cpp type gpumem has no codec for
  // llama-quantize's Q5_K means Q5_K_M, and gpumem's q4_k a pure Q4_K: a
  // q5_k would be ambiguous, so there is none.
  EXPECT_THROW(choose_types(t, {}, type("q5_k")), InputError);
  EXPECT_THROW(choose_types({{"a.weight", "U8", {256, 4}}}, {}, type("q8_0")), InputError);
  EXPECT_THROW(choose_types({{"a.weight", "Q4_K", {256, 4}}}, {}, type("q8_0")), InputError);
  // Integers are copied; an already quantized tensor left alone is too.
  EXPECT_EQ(types({{"ids.weight", "I64", {256, 4}}}, type("q8_0")).at("ids.weight"), "I64");
  auto keep = type("q8_0");
  keep.keep = "a\\..*";
  EXPECT_EQ(types({{"a.weight", "Q4_K", {256, 4}}}, keep).at("a.weight"), "Q4_K");
  keep.keep = "[";
  EXPECT_THROW(choose_types(t, {}, keep), InputError);
}

}  // namespace
}  // namespace gpumem::weights
