// `gpumem quantize` as users run it: safetensors, GGUF and ONNX files in,
// a GGUF file out whose types follow llama.cpp's rules and whose bytes are
// the codecs' on the same floats; bad inputs leave no output.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"
#include "gpumem/common/mapped_file.h"
#include "gpumem/weights/gguf.h"
#include "gpumem/weights/quantize.h"
#include "gpumem/weights/quantize_file.h"
#include "gpumem/weights/weight_file.h"

namespace {

using gpumem::test::CliRun;
using gpumem::test::run;
namespace w = gpumem::weights;

constexpr uint32_t kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ8_0 = 8, kQ4_K = 12, kQ6_K = 14, kBF16 = 30;

std::string temp(const std::string& name) {
  return testing::TempDir() + "gpumem_quantize_" + std::to_string(getpid()) + "_" + name;
}

// Real values to quantize: the inputs ggml quantized for the codecs'
// known-answer fixture (random at several scales, weight-like blocks,
// outliers, zeros), finite ones only.
const std::vector<float>& real_values() {
  static const std::vector<float> values = [] {
    std::vector<float> out;
    std::ifstream in(std::string(GPUMEM_SOURCE_DIR) + "/tests/data/weights/ggml_kquant_vectors.txt");
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string kind, hex;
      fields >> kind >> hex;
      if (kind != "input") continue;
      for (size_t i = 0; i + 8 <= hex.size(); i += 8) {
        uint32_t bits = 0;
        for (int b = 3; b >= 0; --b)
          bits = bits << 8 | static_cast<uint32_t>(std::stoul(hex.substr(i + 2 * b, 2), nullptr, 16));
        float f;
        std::memcpy(&f, &bits, 4);
        if (std::isfinite(f)) out.push_back(f);
      }
    }
    return out;
  }();
  return values;
}

std::vector<float> values(size_t n, size_t seed) {
  const auto& real = real_values();
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = real[(seed * 7919 + i) % real.size()];
  return out;
}

std::string f32_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}
std::string bf16_bytes(const std::vector<float>& v) {
  std::string out;
  for (const float f : v) {
    const uint16_t h = w::fp32_to_bf16(f);
    out.append(reinterpret_cast<const char*>(&h), 2);
  }
  return out;
}

// A Llama-shaped checkpoint with GGUF's tensor names: 8 layers, rows of 256.
struct Tiny {
  std::vector<w::TensorData> tensors;
  std::map<std::string, std::vector<float>> floats;  // what each tensor holds, as floats
};

Tiny tiny_llama() {
  Tiny m;
  size_t seed = 0;
  const auto add = [&](const std::string& name, std::vector<uint64_t> shape, const std::string& dtype = "F32") {
    uint64_t n = 1;
    for (const uint64_t d : shape) n *= d;
    std::vector<float> v = values(n, ++seed);
    if (dtype == "BF16")
      for (float& f : v) f = w::bf16_to_fp32(w::fp32_to_bf16(f));
    m.tensors.push_back({name, dtype, shape, dtype == "BF16" ? bf16_bytes(v) : f32_bytes(v)});
    m.floats[name] = v;
  };
  add("token_embd.weight", {64, 256});
  for (int l = 0; l < 8; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    add(p + "attn_norm.weight", {256});
    add(p + "attn_q.weight", {256, 256});
    add(p + "attn_k.weight", {64, 256});
    add(p + "attn_v.weight", {64, 256});
    add(p + "attn_output.weight", {256, 256});
    add(p + "ffn_gate.weight", {32, 256}, "BF16");
    add(p + "ffn_up.weight", {32, 256});
    add(p + "ffn_down.weight", {32, 256});
    add(p + "ffn_extra.weight", {256, 32});  // rows of 32: not a whole Q4_K super-block
  }
  add("output_norm.weight", {256});
  add("output.weight", {64, 256});
  return m;
}

std::string write_tiny(const std::string& name) {
  const std::string path = temp(name);
  std::ofstream(path, std::ios::binary) << w::write_safetensors(tiny_llama().tensors);
  return path;
}

std::map<std::string, w::TensorEntry> read_back(const std::string& path) {
  std::map<std::string, w::TensorEntry> out;
  for (const auto& t : w::read_gguf(path).tensors) out[t.name] = t;
  return out;
}

std::string bytes_of(const std::string& path, const w::TensorEntry& t) {
  const gpumem::MappedFile f(path);
  return std::string(f.bytes().substr(t.offset, t.bytes));
}

bool exists(const std::string& path) { return std::filesystem::exists(path); }

// Files beside `path` that a failed run may have left (temporary files).
size_t leftovers(const std::string& path) {
  size_t n = 0;
  const auto name = std::filesystem::path(path).filename().string();
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(path).parent_path()))
    if (e.path().filename().string().rfind("." + name, 0) == 0) ++n;
  return n;
}

TEST(CliQuantize, Q4KMRaisesExactlyTheTensorsLlamaCppRaises) {
  const std::string in = write_tiny("q4km.safetensors"), out = temp("q4km.gguf");
  const CliRun r = run("quantize " + in + " " + out + " --type q4_k_m --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto types = read_back(out);
  // use_more_bits(i, 8): i < 1, i >= 7, or (i - 1) % 3 == 2: layers 0, 3, 6, 7.
  std::set<std::string> expected_q6k = {"output.weight"};
  std::set<std::string> q6k, q4k, f32, fallback;
  for (const int l : {0, 3, 6, 7}) {
    expected_q6k.insert("blk." + std::to_string(l) + ".attn_v.weight");
    expected_q6k.insert("blk." + std::to_string(l) + ".ffn_down.weight");
  }
  for (const auto& [name, t] : types) {
    if (t.dtype == "Q6_K") q6k.insert(name);
    if (t.dtype == "Q4_K") q4k.insert(name);
    if (t.dtype == "F32") f32.insert(name);
  }
  EXPECT_EQ(q6k, expected_q6k);
  // Rows of 32 are not whole Q4_K blocks: llama.cpp falls back to Q5_0.
  for (int l = 0; l < 8; ++l) EXPECT_EQ(types.at("blk." + std::to_string(l) + ".ffn_extra.weight").dtype, "Q5_0") << l;
  EXPECT_EQ(types.at("token_embd.weight").dtype, "Q4_K");  // not tied: output.weight exists
  EXPECT_EQ(types.at("blk.2.attn_v.weight").dtype, "Q4_K");
  EXPECT_EQ(types.at("blk.5.ffn_gate.weight").dtype, "Q4_K");
  EXPECT_EQ(f32, (std::set<std::string>{"output_norm.weight", "blk.0.attn_norm.weight", "blk.1.attn_norm.weight",
                                        "blk.2.attn_norm.weight", "blk.3.attn_norm.weight", "blk.4.attn_norm.weight",
                                        "blk.5.attn_norm.weight", "blk.6.attn_norm.weight", "blk.7.attn_norm.weight"}));
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_EQ(doc["file_type"], 15);  // LLAMA_FTYPE_MOSTLY_Q4_K_M
  EXPECT_EQ(doc["output_file_bytes"], std::filesystem::file_size(out));
  EXPECT_EQ(doc["tensors"].size(), tiny_llama().tensors.size());
  // The names and their order are the input's (safetensors sorts by offset,
  // which write_safetensors gives in the order listed).
  const auto file = w::read_gguf(out);
  const auto tiny = tiny_llama();
  for (size_t i = 0; i < tiny.tensors.size(); ++i) EXPECT_EQ(file.tensors[i].name, tiny.tensors[i].name);
  // GGUF's shape order: ne[0] is safetensors' last dimension.
  EXPECT_EQ(types.at("blk.0.attn_k.weight").shape, (std::vector<uint64_t>{256, 64}));
  EXPECT_EQ(file.metadata.at("general.file_type"), "15");
  EXPECT_EQ(file.metadata.at("general.quantization_version"), "2");
  std::remove(in.c_str());
  std::remove(out.c_str());
}

TEST(CliQuantize, TheBytesAreTheCodecsOnTheSameFloatsAndTheErrorsTheirs) {
  const std::string in = write_tiny("bytes.safetensors"), out = temp("bytes.gguf");
  const CliRun r = run("quantize " + in + " " + out + " --type q4_k_m --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto tiny = tiny_llama();
  const auto types = read_back(out);
  const auto doc = nlohmann::json::parse(r.out);
  std::map<std::string, nlohmann::json> reported;
  for (const auto& t : doc["tensors"]) reported[t["name"].get<std::string>()] = t;
  for (const auto& [name, t] : types) {
    const std::vector<float>& x = tiny.floats.at(name);
    const auto type = static_cast<w::GgmlTypeId>(w::ggml_type_named(t.dtype)->id);
    const std::string expected = w::quantize(type, x.data(), x.size());
    ASSERT_EQ(bytes_of(out, t), expected) << name << " " << t.dtype;
    const auto back = w::dequantize(type, expected, x.size());
    const auto e = w::quantization_error(x.data(), back.data(), x.size());
    EXPECT_NEAR(reported[name]["rmse"].get<double>(), e.rmse, 1e-9 + e.rmse * 1e-9) << name;
    EXPECT_EQ(reported[name]["max_abs"].get<double>(), e.max_abs) << name;
    EXPECT_EQ(reported[name]["bytes_after"].get<uint64_t>(), t.bytes) << name;
  }
  // A Q4_K tensor's error is a Q4_K error, not zero.
  EXPECT_GT(reported["blk.1.attn_q.weight"]["rmse"].get<double>(), 0.0);
  std::remove(in.c_str());
  std::remove(out.c_str());
}

TEST(CliQuantize, EachPlainTypeAndKeep) {
  const std::string in = write_tiny("plain.safetensors");
  for (const auto& [type, id] : std::vector<std::pair<std::string, std::string>>{
           {"q8_0", "Q8_0"}, {"q4_0", "Q4_0"}, {"q4_k", "Q4_K"}, {"q6_k", "Q6_K"}, {"f16", "F16"}, {"bf16", "BF16"}}) {
    const std::string out = temp("plain_" + type + ".gguf");
    const CliRun r = run("quantize " + in + " " + out + " --type " + type + " --keep 'blk\\.1\\..*'");
    ASSERT_EQ(r.code, 0) << type << ": " << r.err;
    const auto types = read_back(out);
    EXPECT_EQ(types.at("blk.2.attn_q.weight").dtype, id) << type;
    EXPECT_EQ(types.at("blk.2.attn_norm.weight").dtype, "F32") << type;
    // --keep: the whole name must match, and the input's type stays.
    EXPECT_EQ(types.at("blk.1.attn_q.weight").dtype, "F32") << type;
    EXPECT_EQ(types.at("blk.1.ffn_gate.weight").dtype, "BF16") << type;
    EXPECT_EQ(bytes_of(out, types.at("blk.1.attn_q.weight")), f32_bytes(tiny_llama().floats.at("blk.1.attn_q.weight")));
    EXPECT_NE(r.out.find("--keep"), std::string::npos) << r.out;
    std::remove(out.c_str());
  }
  // llama.cpp's Q4_0 puts output.weight in Q6_K; --pure does not.
  const std::string out = temp("pure.gguf");
  ASSERT_EQ(run("quantize " + in + " " + out + " --type q4_0").code, 0);
  EXPECT_EQ(read_back(out).at("output.weight").dtype, "Q6_K");
  ASSERT_EQ(run("quantize " + in + " " + out + " --type q4_0 --pure").code, 0);
  EXPECT_EQ(read_back(out).at("output.weight").dtype, "Q4_0");
  // A regex that matches part of a name only keeps nothing.
  ASSERT_EQ(run("quantize " + in + " " + out + " --type q8_0 --keep attn_q").code, 0);
  EXPECT_EQ(read_back(out).at("blk.1.attn_q.weight").dtype, "Q8_0");
  std::remove(out.c_str());
  std::remove(in.c_str());
}

TEST(CliQuantize, AGgufKeepsItsMetadataAndGetsLlamaCppsFileType) {
  const auto tiny = tiny_llama();
  w::GgufContents c;
  c.metadata = {{"general.architecture", w::GgufValue::string("llama")},
                {"llama.block_count", w::GgufValue::u32(8)},
                {"general.file_type", w::GgufValue::u32(0)},
                {"tokenizer.ggml.tokens", w::GgufValue::strings({"<s>", "</s>", "hello"})},
                {"llama.rope.freq_base", w::GgufValue::f32(500000.0f)}};
  for (const auto& t : tiny.tensors) {
    if (t.dtype != "F32") continue;
    std::vector<uint64_t> ne(t.shape.rbegin(), t.shape.rend());
    c.tensors.push_back({t.name, kF32, ne, t.data});
  }
  const std::string in = temp("model.gguf"), out = temp("model.q6_k.gguf");
  std::ofstream(in, std::ios::binary) << w::write_gguf(c);
  const CliRun r = run("quantize " + in + " " + out + " --type q6_k");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto file = w::read_gguf(out);
  EXPECT_EQ(file.metadata.at("general.architecture"), "llama");
  EXPECT_EQ(file.metadata.at("tokenizer.ggml.tokens"), "[\"<s>\", \"</s>\", \"hello\"]");
  EXPECT_EQ(file.metadata.at("llama.rope.freq_base"), "500000");
  EXPECT_EQ(file.metadata.at("general.file_type"), "18");  // LLAMA_FTYPE_MOSTLY_Q6_K
  std::map<std::string, std::string> types;
  for (const auto& t : file.tensors) types[t.name] = t.dtype;
  EXPECT_EQ(types.at("blk.0.attn_q.weight"), "Q6_K");
  EXPECT_EQ(types.at("blk.0.ffn_extra.weight"), "Q8_0");  // rows of 32: llama.cpp's fallback
  EXPECT_EQ(types.at("blk.0.attn_norm.weight"), "F32");
  std::remove(in.c_str());
  std::remove(out.c_str());
}

// An ONNX model with F32 initializers, stored both ways ONNX allows.
std::string write_onnx(const std::string& name, bool with_nan = false) {
  onnx::ModelProto model;
  model.set_ir_version(7);
  model.add_opset_import()->set_version(13);
  auto* g = model.mutable_graph();
  g->set_name("mlp");
  const auto add = [&](const std::string& tensor, std::vector<int64_t> dims, bool raw, size_t seed) {
    auto* t = g->add_initializer();
    t->set_name(tensor);
    t->set_data_type(onnx::TensorProto::FLOAT);
    uint64_t n = 1;
    for (const int64_t d : dims) {
      t->add_dims(d);
      n *= static_cast<uint64_t>(d);
    }
    std::vector<float> v = values(n, seed);
    if (with_nan && seed == 2) v[5] = NAN;
    if (raw)
      t->set_raw_data(f32_bytes(v));
    else
      for (const float f : v) t->add_float_data(f);
  };
  add("onnx::MatMul_10", {256, 64}, true, 1);
  add("fc.weight", {64, 256}, false, 2);
  add("fc.bias", {64}, true, 3);
  add("onnx::Conv_3", {8, 4, 3, 3}, true, 4);  // rows of 3
  std::string bytes;
  model.SerializeToString(&bytes);
  const std::string path = temp(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(CliQuantize, AnOnnxModelsInitializers) {
  const std::string in = write_onnx("mlp.onnx"), out = temp("mlp.gguf");
  const CliRun r = run("quantize " + in + " " + out + " --type q8_0 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto types = read_back(out);
  EXPECT_EQ(types.at("onnx::MatMul_10").dtype, "Q8_0");  // ONNX names its weights as it likes: any 2-D weight
  EXPECT_EQ(types.at("onnx::MatMul_10").shape, (std::vector<uint64_t>{64, 256}));
  EXPECT_EQ(types.at("fc.weight").dtype, "Q8_0");
  EXPECT_EQ(types.at("fc.bias").dtype, "F32");
  // Q8_0 has no fallback in llama.cpp (it stops); gpumem writes F16.
  EXPECT_EQ(types.at("onnx::Conv_3").dtype, "F16");
  const std::vector<float> x = values(64 * 256, 2);
  EXPECT_EQ(bytes_of(out, types.at("fc.weight")), w::quantize(w::GgmlTypeId::kQ8_0, x.data(), x.size()));
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["format"], "onnx");
  EXPECT_EQ(doc["file_type"], 7);
  const auto file = w::read_gguf(out);
  EXPECT_EQ(file.metadata.at("general.name"), std::filesystem::path(in).stem().string());
  EXPECT_EQ(file.metadata.count("general.architecture"), 0u);
  std::remove(in.c_str());
  std::remove(out.c_str());
}

TEST(CliQuantize, OnnxsOwnTestModelWithPyTorchsWeights) {
  const std::string model = "/usr/share/libonnx-testdata/data/pytorch-operator/test_operator_conv/model.onnx";
  if (!exists(model)) GTEST_SKIP() << "libonnx-testdata is not installed";
  const std::string out = temp("conv.gguf");
  const CliRun r = run("quantize " + model + " " + out + " --type q4_k_m --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  ASSERT_GE(doc["tensors"].size(), 1u);
  for (const auto& t : doc["tensors"]) {
    // Convolution kernels have rows of their kernel's width: F16 (llama.cpp's last resort).
    if (t["shape"].size() >= 2) {
      EXPECT_EQ(t["to"], "F16") << t.dump();
    }
    if (t["to"] == "F16") {
      EXPECT_GT(t["rmse"].get<double>(), 0.0) << t.dump();
    }
  }
  std::remove(out.c_str());
}

TEST(CliQuantize, AShardedCheckpointThroughItsIndex) {
  const auto tiny = tiny_llama();
  const std::string dir = temp("sharded");
  std::filesystem::create_directories(dir);
  std::vector<w::TensorData> first(tiny.tensors.begin(), tiny.tensors.begin() + 20);
  std::vector<w::TensorData> second(tiny.tensors.begin() + 20, tiny.tensors.end());
  std::ofstream(dir + "/model-00001-of-00002.safetensors", std::ios::binary) << w::write_safetensors(first);
  std::ofstream(dir + "/model-00002-of-00002.safetensors", std::ios::binary) << w::write_safetensors(second);
  nlohmann::json index;
  for (const auto& t : first) index["weight_map"][t.name] = "model-00001-of-00002.safetensors";
  for (const auto& t : second) index["weight_map"][t.name] = "model-00002-of-00002.safetensors";
  std::ofstream(dir + "/model.safetensors.index.json") << index.dump();
  const std::string out = temp("sharded.gguf");
  const CliRun r = run("quantize " + dir + " " + out + " --type q8_0 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["format"], "safetensors-sharded");
  const auto types = read_back(out);
  ASSERT_EQ(types.size(), tiny.tensors.size());
  for (const auto& t : tiny.tensors) {
    const auto& e = types.at(t.name);
    if (e.dtype != "Q8_0") continue;
    const auto& x = tiny.floats.at(t.name);
    EXPECT_EQ(bytes_of(out, e), w::quantize(w::GgmlTypeId::kQ8_0, x.data(), x.size())) << t.name;
  }
  std::filesystem::remove_all(dir);
  std::remove(out.c_str());
}

// A Hugging Face checkpoint (its names, its config.json beside it) becomes a
// GGUF that gpumem llm reads as the same model: the config's architecture
// and hyperparameters are written as llama.cpp's key-values.
TEST(CliQuantize, ASafetensorsCheckpointsConfigTravelsIntoTheGguf) {
  const std::string dir = temp("hf_qwen2");
  std::filesystem::create_directories(dir);
  // Qwen2's shape in small: grouped-query attention with biases, tied embeddings.
  std::ofstream(dir + "/config.json") << R"({"model_type": "qwen2", "hidden_size": 256, "num_hidden_layers": 3,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 320,
    "max_position_embeddings": 4096, "tie_word_embeddings": true, "torch_dtype": "float32"})";
  std::vector<w::TensorData> tensors;
  size_t seed = 0;
  const auto add = [&](const std::string& name, std::vector<uint64_t> shape) {
    uint64_t n = 1;
    for (const uint64_t d : shape) n *= d;
    tensors.push_back({name, "F32", shape, f32_bytes(values(n, ++seed))});
  };
  add("model.embed_tokens.weight", {320, 256});
  for (int l = 0; l < 3; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {256});
    for (const auto& [proj, rows] : {std::pair{"q", 256}, {"k", 128}, {"v", 128}}) {
      add(p + "self_attn." + proj + "_proj.weight", {uint64_t(rows), 256});
      add(p + "self_attn." + proj + "_proj.bias", {uint64_t(rows)});
    }
    add(p + "self_attn.o_proj.weight", {256, 256});
    add(p + "post_attention_layernorm.weight", {256});
    add(p + "mlp.gate_proj.weight", {512, 256});
    add(p + "mlp.up_proj.weight", {512, 256});
    add(p + "mlp.down_proj.weight", {256, 512});
  }
  add("model.norm.weight", {256});
  std::ofstream(dir + "/model.safetensors", std::ios::binary) << w::write_safetensors(tensors);

  const std::string out = temp("hf_qwen2.gguf");
  const CliRun q = run("quantize " + dir + "/model.safetensors " + out + " --type q8_0 --json");
  ASSERT_EQ(q.code, 0) << q.err;
  const auto report = nlohmann::json::parse(q.out);
  EXPECT_EQ(report["architecture"], "qwen2");
  EXPECT_EQ(report["architecture_from"], dir + "/config.json");
  const auto gguf = w::read_gguf(out);
  EXPECT_EQ(gguf.metadata.at("general.architecture"), "qwen2");
  EXPECT_EQ(gguf.metadata.at("qwen2.attention.head_count_kv"), "2");

  const CliRun from_gguf = run("llm " + out + " --gpu 24GiB --json");
  const CliRun from_folder = run("llm " + dir + " --gpu 24GiB --json");
  ASSERT_EQ(from_gguf.code, 0) << from_gguf.err;
  ASSERT_EQ(from_folder.code, 0) << from_folder.err;
  const auto a = nlohmann::json::parse(from_gguf.out), b = nlohmann::json::parse(from_folder.out);
  for (const char* field : {"architecture", "layers", "embedding", "heads", "kv_heads", "head_dim_k", "feed_forward",
                            "vocab", "training_context", "tied_embeddings", "parameters"})
    EXPECT_EQ(a["model"][field], b["model"][field]) << field;
  EXPECT_EQ(a["kv_bytes"], b["kv_bytes"]);

  // A GGUF input keeps its own architecture; with no config there is none.
  const CliRun again = run("quantize " + out + " " + out + ".f16 --type q8_0 --json");
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(nlohmann::json::parse(again.out)["architecture_from"], "input");
  std::filesystem::remove(dir + "/config.json");
  const CliRun bare = run("quantize " + dir + "/model.safetensors " + out + " --type q8_0 --json");
  ASSERT_EQ(bare.code, 0) << bare.err;
  EXPECT_TRUE(nlohmann::json::parse(bare.out)["architecture"].is_null());
  std::filesystem::remove_all(dir);
  std::remove(out.c_str());
  std::remove((out + ".f16").c_str());
}

// llama.cpp's own llama_model_quantize on the same GGUF writes the same
// tensors (but for the Q5_0 that gpumem writes as Q8_0): runs when
// GPUMEM_LIBLLAMA names libllama (npm @node-llama-cpp/linux-x64,
// bins/linux-x64/libllama.*.so) and cc and python3 are there.
TEST(CliQuantize, SameTensorsAsLlamaCppsOwnQuantize) {
  const char* lib = std::getenv("GPUMEM_LIBLLAMA");
  if (!lib || !exists(lib)) GTEST_SKIP() << "GPUMEM_LIBLLAMA=PATH/libllama.so is not set";
  const std::string src = GPUMEM_SOURCE_DIR, runner = temp("llama_quantize");
  ASSERT_EQ(std::system(("cc -O1 -o " + runner + " " + src + "/tools/llama_quantize.c -ldl").c_str()), 0);
  const std::string cmd =
      "python3 " + src + "/tools/llama_quantize_check.py " + lib + " " + runner + " " + GPUMEM_CLI_PATH + " " + src +
      "/tests/data/weights/tiny_llama.safetensors 4 q4_k_m q4_k_s q5_k_m q5_k_s q5_0 q5_1 q8_0 q4_0 q6_k q4_k f16 "
      "bf16 f32";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::remove(runner.c_str());
}

TEST(CliQuantize, BadInputsAreOneLineAndLeaveNoOutput) {
  const std::string out = temp("bad.gguf");
  const auto one_line = [&](const std::string& args, const std::string& part) {
    const CliRun r = run(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_EQ(r.out, "") << args;
    EXPECT_EQ(r.err.rfind("gpumem: error: ", 0), 0u) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
    EXPECT_NE(r.err.find(part), std::string::npos) << args << "\n" << r.err;
    EXPECT_FALSE(exists(out)) << args;
    EXPECT_EQ(leftovers(out), 0u) << args;
  };
  // A NaN cannot be quantized: the file and the tensor are named.
  const std::string nan = write_onnx("nan.onnx", true);
  one_line("quantize " + nan + " " + out + " --type q4_0", nan + ": tensor 'fc.weight': ");
  const std::string truncated = temp("truncated.safetensors");
  {
    const std::string bytes = w::write_safetensors(tiny_llama().tensors);
    std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() - 100);
  }
  one_line("quantize " + truncated + " " + out + " --type q8_0", truncated + ": ");
  const std::string good = write_tiny("good.safetensors");
  one_line("quantize " + good + " " + out + " --type q5_k", "'q5_k' is not one of");
  one_line("quantize " + good + " " + out + " --type q8_0 --keep '('", "--keep");
  one_line("quantize " + temp("missing.safetensors") + " " + out + " --type q8_0", "missing.safetensors");
  {
    const CliRun r = run("quantize " + good + " " + temp("no_such_dir") + "/out.gguf --type q8_0");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("cannot write"), std::string::npos) << r.err;
  }
  // An already quantized GGUF tensor is not requantized.
  w::GgufContents q;
  q.tensors.push_back({"blk.0.attn_q.weight", kQ8_0, {256, 4}, std::string(8 * 34 * 4, '\0')});
  const std::string quantized = temp("quantized.gguf");
  std::ofstream(quantized, std::ios::binary) << w::write_gguf(q);
  one_line("quantize " + quantized + " " + out + " --type q4_k", "tensor 'blk.0.attn_q.weight': a Q8_0 tensor");
  // A failure leaves an existing output as it was.
  std::ofstream(out) << "before";
  const CliRun r = run("quantize " + nan + " " + out + " --type q8_0");
  EXPECT_EQ(r.code, 2);
  std::ifstream back(out);
  std::string text;
  std::getline(back, text);
  EXPECT_EQ(text, "before");
  EXPECT_EQ(leftovers(out), 0u);
  for (const auto& p : {nan, truncated, good, quantized, out}) std::remove(p.c_str());
}

}  // namespace
