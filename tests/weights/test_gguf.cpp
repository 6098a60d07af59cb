// GGUF: files from gpumem's writer read back exactly (names, types, shapes,
// offsets, bytes, metadata); a sparse Llama-3-8B-shaped file whose table
// adds up to the published parameter count; damaged files (truncated at
// every byte, absurd counts, overlaps, bad alignment, unknown types) fail
// with one line naming the byte or the tensor, never a crash or a hang.
#include <sys/stat.h>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpumem/common/error.h"
#include "gpumem/weights/gguf.h"
#include "test_errors.h"
#include "test_paths.h"
#include "weights/gguf_fixtures.h"

namespace gpumem::weights::test_gguf {
namespace {

using test::error_of;

std::string parse_error(const std::string& bytes) {
  return error_of([&] { parse_gguf(bytes, "m.gguf"); });
}

// Where a tensor's info starts (after its name) in a writer's image.
size_t info_of(const std::string& image, const std::string& name) {
  const size_t at = image.find(name);
  EXPECT_NE(at, std::string::npos);
  return at + name.size();
}

void put_u32(std::string& image, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) image[at + i] = static_cast<char>(v >> (8 * i));
}
void put_u64(std::string& image, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) image[at + i] = static_cast<char>(v >> (8 * i));
}

TEST(Gguf, TypeTableMatchesGgml) {
  ASSERT_NE(ggml_type(12), nullptr);
  EXPECT_EQ(ggml_type(12)->name, "Q4_K");
  EXPECT_EQ(ggml_type(12)->block_size, 256u);
  EXPECT_EQ(ggml_type(12)->type_size, 144u);
  EXPECT_EQ(ggml_type(8)->type_size, 34u);
  EXPECT_EQ(ggml_type(14)->type_size, 210u);
  EXPECT_EQ(ggml_type(30)->name, "BF16");
  EXPECT_EQ(ggml_type(34)->name, "TQ1_0");
  for (uint32_t retired : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 1000u}) EXPECT_EQ(ggml_type(retired), nullptr);
  EXPECT_EQ(ggml_type_named("q6_k"), ggml_type(14));
  EXPECT_EQ(ggml_type_named("Q9_K"), nullptr);
  EXPECT_EQ(ggml_tensor_bytes(kQ4_K, {4096, 4096}), 4096ull * 16 * 144);
  EXPECT_THROW(ggml_tensor_bytes(kQ4_K, {100}), std::invalid_argument);
}

TEST(Gguf, RoundTripKeepsTableDataAndMetadata) {
  const GgufContents c = small_model();
  const std::string image = write_gguf(c);
  const std::string path = write_temp("round_trip.gguf", image);
  const WeightFile f = read_gguf(path);
  EXPECT_EQ(f.format, "gguf");
  EXPECT_EQ(f.file_bytes, image.size());
  ASSERT_EQ(f.tensors.size(), c.tensors.size());
  const std::vector<std::string> dtypes = {"F32", "Q8_0", "Q4_K", "F16"};
  uint64_t previous_end = 0;
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    const TensorEntry& t = f.tensors[i];
    EXPECT_EQ(t.name, c.tensors[i].name);
    EXPECT_EQ(t.dtype, dtypes[i]);
    EXPECT_EQ(t.shape, c.tensors[i].ne);
    EXPECT_EQ(t.file, path);
    EXPECT_EQ(t.bytes, c.tensors[i].data.size());
    EXPECT_EQ(t.offset % 32, 0u) << t.name;
    EXPECT_GE(t.offset, previous_end);
    EXPECT_EQ(image.substr(t.offset, t.bytes), c.tensors[i].data) << t.name;
    previous_end = t.offset + t.bytes;
  }
  EXPECT_EQ(f.tensors[2].bytes, 2u * 144);
  EXPECT_EQ(f.metadata.at("general.architecture"), "llama");
  EXPECT_EQ(f.metadata.at("llama.block_count"), "2");
  EXPECT_EQ(f.metadata.at("llama.rope.dimension_count"), "-3");
  EXPECT_EQ(f.metadata.at("llama.rope.freq_base"), "500000");
  EXPECT_EQ(f.metadata.at("llama.use_parallel_residual"), "true");
  EXPECT_EQ(f.metadata.at("llama.context_length"), "1099511627776");
  EXPECT_EQ(f.metadata.at("tokenizer.ggml.tokens"), R"(["<s>", "a", "b"])");
  EXPECT_EQ(f.metadata.at("tokenizer.ggml.token_type"), "[9 int32 values]");
  EXPECT_EQ(f.metadata.at("tokenizer.ggml.scores"), "[0.5, -1.25]");
  EXPECT_EQ(f.metadata.size(), c.metadata.size());
}

TEST(Gguf, AlignmentKeyPlacesTheData) {
  GgufContents c = small_model();
  c.metadata.push_back({"general.alignment", GgufValue::u32(64)});
  const std::string image = write_gguf(c);
  const WeightFile f = parse_gguf(image, "a.gguf");
  for (size_t i = 0; i < f.tensors.size(); ++i) {
    EXPECT_EQ(f.tensors[i].offset % 64, 0u);
    EXPECT_EQ(image.substr(f.tensors[i].offset, f.tensors[i].bytes), c.tensors[i].data);
  }
  EXPECT_EQ(f.metadata.at("general.alignment"), "64");
}

TEST(Gguf, SparseLlama3_8BAddsUpToItsPublishedParameters) {
  const std::string path = temp_path("llama3_8b.gguf");
  write_gguf_sparse(path, llama3_8b());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_GT(static_cast<uint64_t>(st.st_size), uint64_t{4} << 30);           // Q4_K-ish: gigabytes
  EXPECT_LT(static_cast<uint64_t>(st.st_blocks) * 512, uint64_t{16} << 20);  // yet no disk

  const auto start = std::chrono::steady_clock::now();
  const WeightFile f = read_gguf(path);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  EXPECT_LT(ms.count(), 2000);  // the header only; the goal (50 ms) is the benchmark's
  ASSERT_EQ(f.tensors.size(), 291u);
  uint64_t params = 0, bytes = 0;
  for (const TensorEntry& t : f.tensors) {
    params += std::accumulate(t.shape.begin(), t.shape.end(), uint64_t{1}, std::multiplies<>());
    bytes += t.bytes;
  }
  EXPECT_EQ(params, 8'030'261'248ull);
  EXPECT_EQ(f.tensors.front().dtype, "F16");
  EXPECT_EQ(f.tensors.front().bytes, 4096ull * 128256 * 2);
  EXPECT_EQ(f.tensors.back().offset + f.tensors.back().bytes, static_cast<uint64_t>(st.st_size));
  EXPECT_LE(bytes, static_cast<uint64_t>(st.st_size));
  EXPECT_EQ(f.metadata.at("tokenizer.ggml.tokens"), "[128256 strings]");
  EXPECT_EQ(f.metadata.at("llama.attention.head_count_kv"), "8");
  std::remove(path.c_str());
}

TEST(Gguf, EveryTruncationFailsOnOneLine) {
  const std::string image = write_gguf(small_model());
  // The padding after the last tensor's data is not needed.
  const TensorEntry last = parse_gguf(image, "m.gguf").tensors.back();  // a copy: the result is a temporary
  const size_t end = last.offset + last.bytes;
  for (size_t n = 0; n < end; ++n) {
    const std::string e = parse_error(image.substr(0, n));
    EXPECT_EQ(e.rfind("m.gguf: ", 0), 0u) << n << ": " << e;
  }
  for (size_t n = end; n < image.size(); ++n) EXPECT_EQ(parse_gguf(image.substr(0, n), "m.gguf").tensors.size(), 4u);
  // Read through the mapping too, at a few places.
  for (size_t n : {size_t{0}, size_t{3}, size_t{20}, end / 2, end - 1}) {
    const std::string path = write_temp("cut.gguf", image.substr(0, n));
    EXPECT_EQ(error_of([&] { read_gguf(path); }).rfind(path + ": ", 0), 0u);
  }
}

TEST(Gguf, HeaderProblemsNameTheByte) {
  const std::string image = write_gguf(small_model());
  EXPECT_EQ(parse_error("GGML" + image.substr(4)), "m.gguf: byte 0: not a GGUF file (it does not start with \"GGUF\")");
  std::string v = image;
  put_u32(v, 4, 1);
  EXPECT_EQ(parse_error(v), "m.gguf: byte 4: GGUF version 1 is not supported (only 2 and 3)");
  put_u32(v, 4, 2);  // v2 has v3's layout
  EXPECT_EQ(parse_gguf(v, "m.gguf").tensors.size(), 4u);
  put_u32(v, 4, 0x03000000);
  EXPECT_NE(parse_error(v).find("big-endian"), std::string::npos);

  std::string t = image;
  put_u64(t, 8, uint64_t{1} << 60);
  EXPECT_NE(parse_error(t).find("m.gguf: byte 8: 1152921504606846976 tensors cannot fit"), std::string::npos);
  std::string k = image;
  put_u64(k, 16, uint64_t{1} << 60);
  EXPECT_NE(parse_error(k).find("m.gguf: byte 16: "), std::string::npos);

  std::string s = image;  // the first key's length
  put_u64(s, 24, uint64_t{1} << 60);
  EXPECT_NE(parse_error(s).find("m.gguf: byte 24: a key of 1152921504606846976 bytes runs past the end"),
            std::string::npos);

  std::string a = image;  // the tokens array's length
  const size_t tokens = a.find("tokenizer.ggml.tokens") + std::string("tokenizer.ggml.tokens").size() + 4 + 4;
  put_u64(a, tokens, uint64_t{1} << 60);
  EXPECT_NE(parse_error(a).find("an array of 1152921504606846976 string values runs past the end"), std::string::npos);

  std::string b = image;  // the bool's value
  b[b.find("use_parallel_residual") + std::string("use_parallel_residual").size() + 4] = 7;
  EXPECT_NE(parse_error(b).find("a bool of value 7"), std::string::npos);

  std::string u = image;  // the first key's type
  put_u32(u, 32 + std::string("general.architecture").size(), 13);
  EXPECT_NE(parse_error(u).find("unknown value type 13"), std::string::npos);
}

TEST(Gguf, BadAlignmentIsRefused) {
  GgufContents c = small_model();
  c.metadata.push_back({"general.alignment", GgufValue::u32(64)});
  std::string image = write_gguf(c);
  const size_t value = image.find("general.alignment") + std::string("general.alignment").size() + 4;
  put_u32(image, value, 48);
  EXPECT_NE(parse_error(image).find("general.alignment 48 is not a power of two"), std::string::npos);
  put_u32(image, value, 0);
  EXPECT_NE(parse_error(image).find("general.alignment 0 is not a power of two"), std::string::npos);
  put_u32(image, value - 4, 10);  // a uint64 now: the wrong type
  EXPECT_NE(parse_error(image).find("general.alignment is a uint64, not a uint32"), std::string::npos);
}

TEST(Gguf, TensorProblemsNameTheTensor) {
  const std::string image = write_gguf(small_model());
  const size_t q = info_of(image, "blk.0.attn_q.weight");   // n_dims, ne[2], type, offset
  const size_t up = info_of(image, "blk.0.ffn_up.weight");  // n_dims, ne[4], type, offset
  auto patched = [&](size_t at, uint64_t v, bool wide) {
    std::string copy = image;
    wide ? put_u64(copy, at, v) : put_u32(copy, at, static_cast<uint32_t>(v));
    return parse_error(copy);
  };
  EXPECT_EQ(patched(q + 4 + 16, 99, false), "m.gguf: tensor 'blk.0.attn_q.weight': unknown ggml type 99");
  EXPECT_EQ(patched(q + 4 + 16, 4, false), "m.gguf: tensor 'blk.0.attn_q.weight': unknown ggml type 4");
  EXPECT_NE(patched(q, 5, false).find("tensor 'blk.0.attn_q.weight': 5 dimensions (1 to 4 allowed)"),
            std::string::npos);
  EXPECT_NE(patched(q, 0, false).find("0 dimensions"), std::string::npos);
  EXPECT_NE(patched(q + 4, 0, true).find("a dimension of size 0"), std::string::npos);
  EXPECT_NE(patched(q + 4, 48, true).find("ne[0] = 48 is not a multiple of Q8_0's block of 32"), std::string::npos);
  EXPECT_NE(patched(up + 4 + 8, uint64_t{1} << 62, true).find("the element count overflows"), std::string::npos);
  EXPECT_NE(patched(q + 4 + 16 + 4, 8, true).find("offset 8 is not a multiple of the alignment 32"), std::string::npos);
  EXPECT_EQ(patched(q + 4 + 16 + 4, 0, true),
            "m.gguf: tensor 'blk.0.attn_q.weight': its data overlaps tensor 'token_embd.weight'");
  EXPECT_NE(patched(up + 4 + 32 + 4, uint64_t{1} << 40, true)
                .find("tensor 'blk.0.ffn_up.weight': its 288 bytes at data offset 1099511627776 run past the end"),
            std::string::npos);
  EXPECT_NE(patched(up + 4 + 32 + 4, UINT64_MAX - 31, true).find("run past the end"), std::string::npos);
}

TEST(Gguf, DuplicateNamesAndKeysAreRefused) {
  GgufContents c = small_model();
  c.tensors[1].name = c.tensors[0].name;
  EXPECT_NE(parse_error(write_gguf(c)).find("tensor 'token_embd.weight' appears twice"), std::string::npos);
  c = small_model();
  c.metadata.push_back({"general.name", GgufValue::string("again")});
  EXPECT_NE(parse_error(write_gguf(c)).find("key 'general.name' appears twice"), std::string::npos);
}

TEST(Gguf, WriterRefusesDataOfTheWrongSize) {
  GgufContents c = small_model();
  c.tensors[0].data.pop_back();
  EXPECT_THROW(write_gguf(c), std::invalid_argument);
  EXPECT_THROW(write_gguf_sparse(temp_path("never.gguf"), small_model()), std::invalid_argument);
}

// fuzz/corpus/gguf's seeds are the writer's output; GPUMEM_WRITE_GGUF_SEEDS=1
// rewrites them after a change to the writer.
TEST(Gguf, SeedCorpusIsTheWritersOutput) {
  GgufContents aligned = small_model();
  aligned.metadata.push_back({"general.alignment", GgufValue::u32(64)});
  GgufContents metadata_only;
  metadata_only.metadata = {{"general.architecture", GgufValue::string("none")}};
  GgufContents one;
  one.tensors = {tensor("w", 2, {32, 2}, 5)};  // Q4_0
  const std::vector<std::pair<std::string, GgufContents>> seeds = {{"seed_small.gguf", small_model()},
                                                                   {"seed_aligned_64.gguf", aligned},
                                                                   {"seed_metadata_only.gguf", metadata_only},
                                                                   {"seed_one_q4_0.gguf", one}};
  const auto dir = test::source_dir() / "fuzz" / "corpus" / "gguf";
  for (const auto& [name, contents] : seeds) {
    const std::string image = write_gguf(contents);
    if (std::getenv("GPUMEM_WRITE_GGUF_SEEDS")) std::ofstream(dir / name, std::ios::binary) << image;
    EXPECT_EQ(test::read_file_bytes(dir / name), image) << name;
    EXPECT_NO_THROW(parse_gguf(image, name));
  }
}

}  // namespace
}  // namespace gpumem::weights::test_gguf
