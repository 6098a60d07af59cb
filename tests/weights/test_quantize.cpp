// The codecs against ggml itself: tests/data/weights/ggml_vectors.txt holds
// inputs and the bytes libggml-base.so's reference functions made of them
// (tools/ggml_vectors.c says how), and ours must equal them byte for byte.
// Plus the error bounds of a round trip and the input checks.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpumem/common/error.h"
#include "gpumem/weights/quantize.h"
#include "weights/hex_bytes.h"

namespace gpumem::weights {
namespace {

using test::floats;
using test::hex;
using test::unhex;

// Each kind's lines, in file order ("input", "q8_0", "conv", ...), of
// ggml_vectors.txt or (K-quants) ggml_kquant_vectors.txt.
std::map<std::string, std::vector<std::string>> vectors(const std::string& file = "ggml_vectors.txt") {
  std::ifstream in(std::string(GPUMEM_SOURCE_DIR) + "/tests/data/weights/" + file);
  std::map<std::string, std::vector<std::string>> kinds;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string kind, hex;
    fields >> kind >> hex;
    kinds[kind].push_back(unhex(hex));
  }
  return kinds;
}

void expect_blocks_equal_ggml(GgmlTypeId type, const std::string& kind, const std::string& file = "ggml_vectors.txt",
                              size_t min_blocks = 30) {
  auto v = vectors(file);
  const auto& inputs = v["input"];
  const auto& expected = v[kind];
  ASSERT_GE(inputs.size(), min_blocks);
  ASSERT_EQ(inputs.size(), expected.size());
  for (size_t b = 0; b < inputs.size(); ++b) {
    const auto x = floats(inputs[b]);
    EXPECT_EQ(hex(quantize(type, x.data(), x.size())), hex(expected[b])) << kind << " block " << b;
  }
  // All blocks at once: the same bytes, concatenated.
  std::vector<float> all;
  std::string want;
  for (size_t b = 0; b < inputs.size(); ++b) {
    const auto x = floats(inputs[b]);
    all.insert(all.end(), x.begin(), x.end());
    want += expected[b];
  }
  EXPECT_EQ(quantize(type, all.data(), all.size()), want);
}

TEST(Quantize, Q8_0EqualsGgmlReference) { expect_blocks_equal_ggml(GgmlTypeId::kQ8_0, "q8_0"); }
TEST(Quantize, Q4_0EqualsGgmlReference) { expect_blocks_equal_ggml(GgmlTypeId::kQ4_0, "q4_0"); }
TEST(Quantize, Q5_0EqualsGgmlReference) { expect_blocks_equal_ggml(GgmlTypeId::kQ5_0, "q5_0"); }
TEST(Quantize, Q5_1EqualsGgmlReference) { expect_blocks_equal_ggml(GgmlTypeId::kQ5_1, "q5_1"); }
TEST(Quantize, Q4_KEqualsGgmlReference) {
  expect_blocks_equal_ggml(GgmlTypeId::kQ4_K, "q4_K", "ggml_kquant_vectors.txt", 29);
}
TEST(Quantize, Q5_KEqualsGgmlReference) {
  expect_blocks_equal_ggml(GgmlTypeId::kQ5_K, "q5_K", "ggml_kquant_vectors.txt", 29);
}
TEST(Quantize, Q6_KEqualsGgmlReference) {
  expect_blocks_equal_ggml(GgmlTypeId::kQ6_K, "q6_K", "ggml_kquant_vectors.txt", 29);
}

// The fixture's last 32-value block is float subnormals only: 1/d overflows
// to infinity and ggml's quants are C's conversion of infinities and NaNs,
// which gpumem writes out rather than leave to undefined behaviour.
TEST(Quantize, SubnormalOnlyBlocksEqualGgml) {
  auto v = vectors();
  const auto x = floats(v["input"].back());
  ASSERT_EQ(x.size(), 32u);
  for (const float f : x) ASSERT_LT(std::fabs(f), 0x1p-126f);
  EXPECT_EQ(hex(quantize(GgmlTypeId::kQ8_0, x.data(), 32)), hex(v["q8_0"].back()));
  EXPECT_EQ(hex(quantize(GgmlTypeId::kQ4_0, x.data(), 32)), hex(v["q4_0"].back()));
  EXPECT_EQ(hex(quantize(GgmlTypeId::kQ5_0, x.data(), 32)), hex(v["q5_0"].back()));
  EXPECT_EQ(hex(quantize(GgmlTypeId::kQ5_1, x.data(), 32)), hex(v["q5_1"].back()));
}

// ggml's dequantize_row_* of its own blocks, float for float: the "d" lines
// of `file`, `count` blocks of n values.
void expect_dequantized_equal_ggml(GgmlTypeId type, const std::string& kind, const std::string& file, size_t n,
                                   size_t count) {
  auto v = vectors(file);
  const auto& blocks = v[kind];
  const auto& theirs = v["d" + kind];
  ASSERT_EQ(blocks.size(), count);
  ASSERT_EQ(theirs.size(), blocks.size());
  for (size_t b = 0; b < blocks.size(); ++b) {
    EXPECT_EQ(hex(dequantize(type, blocks[b], n)), hex(theirs[b])) << kind << " block " << b;
  }
}
TEST(Quantize, Q5_0DequantizesAsGgml) {
  expect_dequantized_equal_ggml(GgmlTypeId::kQ5_0, "q5_0", "ggml_vectors.txt", 32, 35);
}
TEST(Quantize, Q5_1DequantizesAsGgml) {
  expect_dequantized_equal_ggml(GgmlTypeId::kQ5_1, "q5_1", "ggml_vectors.txt", 32, 35);
}
TEST(Quantize, Q4_KDequantizesAsGgml) {
  expect_dequantized_equal_ggml(GgmlTypeId::kQ4_K, "q4_K", "ggml_kquant_vectors.txt", 256, 29);
}
TEST(Quantize, Q5_KDequantizesAsGgml) {
  expect_dequantized_equal_ggml(GgmlTypeId::kQ5_K, "q5_K", "ggml_kquant_vectors.txt", 256, 29);
}
TEST(Quantize, Q6_KDequantizesAsGgml) {
  expect_dequantized_equal_ggml(GgmlTypeId::kQ6_K, "q6_K", "ggml_kquant_vectors.txt", 256, 29);
}

TEST(Quantize, HalfConversionsEqualGgml) {
  auto v = vectors();
  const auto& conv = v["conv"];
  ASSERT_GE(conv.size(), 30u);
  ASSERT_EQ(conv.size(), v["fp16"].size());
  ASSERT_EQ(conv.size(), v["bf16"].size());
  for (size_t b = 0; b < conv.size(); ++b) {
    const auto x = floats(conv[b]);
    EXPECT_EQ(hex(quantize(GgmlTypeId::kF16, x.data(), x.size())), hex(v["fp16"][b])) << "block " << b;
    EXPECT_EQ(hex(quantize(GgmlTypeId::kBF16, x.data(), x.size())), hex(v["bf16"][b])) << "block " << b;
  }
}

TEST(Quantize, HalfToFloatIsExactForEveryFiniteHalf) {
  // Widening is exact, so narrowing it back must give every half unchanged.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    if ((bits & 0x7c00) == 0x7c00 && (bits & 0x3ff)) continue;  // NaNs become 0x7e00
    EXPECT_EQ(fp32_to_fp16(fp16_to_fp32(bits)), bits) << h;
    EXPECT_EQ(fp32_to_bf16(bf16_to_fp32(bits)), bits) << h;
  }
}

TEST(Quantize, NaNStaysNaN) {
  const float nan = std::nanf("");
  EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(nan))));
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(-nan))));
}

// The random blocks of the fixture (its first 24) at every scale.
std::vector<float> random_inputs() {
  auto v = vectors();
  std::vector<float> all;
  for (size_t b = 0; b < 24; ++b) {
    const auto x = floats(v["input"][b]);
    all.insert(all.end(), x.begin(), x.end());
  }
  return all;
}

TEST(Quantize, Q8_0RoundTripWithinHalfAStep) {
  const auto x = random_inputs();
  const std::string q = quantize(GgmlTypeId::kQ8_0, x.data(), x.size());
  const auto y = dequantize(GgmlTypeId::kQ8_0, q, x.size());
  for (size_t b = 0; b < x.size() / 32; ++b) {
    const float d =
        fp16_to_fp32(static_cast<uint16_t>(static_cast<uint8_t>(q[b * 34]) | static_cast<uint8_t>(q[b * 34 + 1]) << 8));
    // d/2 from rounding to the grid, plus what rounding d itself to fp16
    // moves the grid's far end: 127 steps of fp16's rounding error (relative
    // 2^-11, or 2^-25 absolute where d is a half subnormal).
    const float bound = d / 2 + 127 * std::max(d * 0x1p-11f, 0x1p-25f);
    for (size_t j = 0; j < 32; ++j) EXPECT_LE(std::fabs(x[b * 32 + j] - y[b * 32 + j]), bound) << b << " " << j;
  }
}

TEST(Quantize, Q4_0RoundTripWithinOneStep) {
  const auto x = random_inputs();
  const std::string q = quantize(GgmlTypeId::kQ4_0, x.data(), x.size());
  const auto y = dequantize(GgmlTypeId::kQ4_0, q, x.size());
  for (size_t b = 0; b < x.size() / 32; ++b) {
    const float d = std::fabs(fp16_to_fp32(
        static_cast<uint16_t>(static_cast<uint8_t>(q[b * 18]) | static_cast<uint8_t>(q[b * 18 + 1]) << 8)));
    // Half a step from rounding, another half where 8.5 clamps to 15 at the
    // top, and fp16's rounding of d over 8 steps.
    const float bound = d + 8 * std::max(d * 0x1p-11f, 0x1p-25f);
    for (size_t j = 0; j < 32; ++j) EXPECT_LE(std::fabs(x[b * 32 + j] - y[b * 32 + j]), bound) << b << " " << j;
  }
}

uint16_t u16_at(const std::string& q, size_t at) {
  return static_cast<uint16_t>(static_cast<uint8_t>(q[at]) | static_cast<uint8_t>(q[at + 1]) << 8);
}

TEST(Quantize, Q5_0RoundTripWithinOneStep) {
  const auto x = random_inputs();
  const std::string q = quantize(GgmlTypeId::kQ5_0, x.data(), x.size());
  const auto y = dequantize(GgmlTypeId::kQ5_0, q, x.size());
  for (size_t b = 0; b < x.size() / 32; ++b) {
    const float d = std::fabs(fp16_to_fp32(u16_at(q, b * 22)));
    // As Q4_0's: half a step, another half where 16.5 clamps to 31 at the
    // top, and fp16's rounding of d over 16 steps.
    const float bound = d + 16 * std::max(d * 0x1p-11f, 0x1p-25f);
    for (size_t j = 0; j < 32; ++j) EXPECT_LE(std::fabs(x[b * 32 + j] - y[b * 32 + j]), bound) << b << " " << j;
  }
}

TEST(Quantize, Q5_1RoundTripWithinHalfAStep) {
  const auto x = random_inputs();
  const std::string q = quantize(GgmlTypeId::kQ5_1, x.data(), x.size());
  const auto y = dequantize(GgmlTypeId::kQ5_1, q, x.size());
  for (size_t b = 0; b < x.size() / 32; ++b) {
    const float d = fp16_to_fp32(u16_at(q, b * 24)), m = fp16_to_fp32(u16_at(q, b * 24 + 2));
    // Half a step from rounding (0.5 added, then truncated), plus fp16's
    // rounding of the min and of d over 31 steps.
    const float bound = d / 2 + 31 * std::max(d * 0x1p-11f, 0x1p-25f) + std::max(std::fabs(m) * 0x1p-11f, 0x1p-25f);
    for (size_t j = 0; j < 32; ++j) EXPECT_LE(std::fabs(x[b * 32 + j] - y[b * 32 + j]), bound) << b << " " << j;
  }
}

TEST(Quantize, ErrorStatsOfARoundTrip) {
  const auto x = random_inputs();
  const QuantError q8 = round_trip_error(GgmlTypeId::kQ8_0, x.data(), x.size());
  const QuantError q4 = round_trip_error(GgmlTypeId::kQ4_0, x.data(), x.size());
  EXPECT_GT(q8.rmse, 0);
  EXPECT_LE(q8.rmse, q8.max_abs);
  EXPECT_LT(q8.rmse, q4.rmse);  // 8 bits beat 4
  const QuantError q5 = round_trip_error(GgmlTypeId::kQ5_0, x.data(), x.size());
  const QuantError q5_1 = round_trip_error(GgmlTypeId::kQ5_1, x.data(), x.size());
  EXPECT_LT(q8.rmse, q5.rmse);  // ... and 5
  EXPECT_LT(q5.rmse, q4.rmse);
  EXPECT_LT(q5_1.rmse, q4.rmse);
  const QuantError f32 = round_trip_error(GgmlTypeId::kF32, x.data(), x.size());
  EXPECT_EQ(f32.rmse, 0);
  EXPECT_EQ(f32.max_abs, 0);
  const float a[] = {1, 2, 3, 4};
  const float b[] = {1, 2, 3, 6};
  const QuantError e = quantization_error(a, b, 4);
  EXPECT_DOUBLE_EQ(e.max_abs, 2);
  EXPECT_DOUBLE_EQ(e.rmse, 1);
}

// The random super-blocks of the K-quant fixture (its first 16), every scale.
std::vector<float> random_super_blocks() {
  auto v = vectors("ggml_kquant_vectors.txt");
  std::vector<float> all;
  for (size_t b = 0; b < 16; ++b) {
    const auto x = floats(v["input"][b]);
    all.insert(all.end(), x.begin(), x.end());
  }
  return all;
}

// Each super-block's error relative to its largest magnitude: K-quants pick
// their scales by least squares, so a bound per value is loose; the block's
// RMSE against its range is what they promise.
std::vector<double> relative_rmse(GgmlTypeId type, const std::vector<float>& x) {
  const auto y = dequantize(type, quantize(type, x.data(), x.size()), x.size());
  std::vector<double> out;
  for (size_t b = 0; b < x.size() / 256; ++b) {
    double amax = 0;
    for (size_t j = 0; j < 256; ++j) amax = std::max(amax, std::fabs(static_cast<double>(x[b * 256 + j])));
    out.push_back(quantization_error(x.data() + b * 256, y.data() + b * 256, 256).rmse / amax);
  }
  return out;
}

TEST(Quantize, Q6_KRoundTripError) {
  const auto x = random_super_blocks();
  // 6 bits over [-amax, amax]: a step of about amax / 32, so an RMSE near
  // step / sqrt(12) ~ 0.009 amax; 8-bit scales and fp16 d add a little.
  // Only where d (about amax / 4096) is a normal half: below amax ~ 0.25 it
  // is subnormal and ggml's own Q6_K loses most of its precision (the
  // fixture's 1e-4 blocks come back with ~57% relative RMSE, as ggml's do).
  const std::string q = quantize(GgmlTypeId::kQ6_K, x.data(), x.size());
  const auto rel = relative_rmse(GgmlTypeId::kQ6_K, x);
  size_t checked = 0;
  for (size_t b = 0; b < rel.size(); ++b) {
    const auto d =
        static_cast<uint16_t>(static_cast<uint8_t>(q[b * 210 + 208]) | static_cast<uint8_t>(q[b * 210 + 209]) << 8);
    if ((d & 0x7c00) == 0) continue;  // subnormal half
    EXPECT_LT(rel[b], 0.012) << "block " << b;
    ++checked;
  }
  EXPECT_GE(checked, 6u);  // the fixture's scales 1, 10 and 1000
  const QuantError q6 = round_trip_error(GgmlTypeId::kQ6_K, x.data(), x.size());
  const QuantError q8 = round_trip_error(GgmlTypeId::kQ8_0, x.data(), x.size());
  EXPECT_GT(q6.rmse, q8.rmse);      // 6 bits lose to 8 ...
  EXPECT_LT(q6.rmse, 4 * q8.rmse);  // ... but not by much
}

TEST(Quantize, Q4_KRoundTripError) {
  const auto x = random_super_blocks();
  // 4 bits over each 32 values' [min, max]: a step of about 2 amax / 15,
  // RMSE near step / sqrt(12) ~ 0.04 amax.
  for (double e : relative_rmse(GgmlTypeId::kQ4_K, x)) EXPECT_LT(e, 0.05);
  const QuantError q4k = round_trip_error(GgmlTypeId::kQ4_K, x.data(), x.size());
  const QuantError q6k = round_trip_error(GgmlTypeId::kQ6_K, x.data(), x.size());
  const QuantError q4_0 = round_trip_error(GgmlTypeId::kQ4_0, x.data(), x.size());
  EXPECT_LT(q6k.rmse, q4k.rmse);
  EXPECT_LT(q4k.rmse, q4_0.rmse);  // the searched scale and min beat Q4_0's amax/8
}

TEST(Quantize, Q5_KRoundTripError) {
  const auto x = random_super_blocks();
  // 5 bits over each 32 values' [min, max]: a step of about 2 amax / 31,
  // RMSE near step / sqrt(12) ~ 0.019 amax.
  for (double e : relative_rmse(GgmlTypeId::kQ5_K, x)) EXPECT_LT(e, 0.025);
  const QuantError q5k = round_trip_error(GgmlTypeId::kQ5_K, x.data(), x.size());
  const QuantError q4k = round_trip_error(GgmlTypeId::kQ4_K, x.data(), x.size());
  const QuantError q6k = round_trip_error(GgmlTypeId::kQ6_K, x.data(), x.size());
  const QuantError q5_1 = round_trip_error(GgmlTypeId::kQ5_1, x.data(), x.size());
  EXPECT_LT(q6k.rmse, q5k.rmse);
  EXPECT_LT(q5k.rmse, q4k.rmse);
  EXPECT_LT(q5k.rmse, q5_1.rmse);  // the searched scale and min beat Q5_1's min and max
}

TEST(Quantize, KQuantsOfZerosAreZeros) {
  const std::vector<float> x(512, 0.0f);
  for (GgmlTypeId type :
       {GgmlTypeId::kQ4_K, GgmlTypeId::kQ5_K, GgmlTypeId::kQ6_K, GgmlTypeId::kQ5_0, GgmlTypeId::kQ5_1}) {
    const auto y = dequantize(type, quantize(type, x.data(), x.size()), x.size());
    for (float v : y) EXPECT_EQ(v, 0.0f);
  }
}

TEST(Quantize, KQuantSizes) {
  EXPECT_EQ(block_elements(GgmlTypeId::kQ4_K), 256u);
  EXPECT_EQ(block_bytes(GgmlTypeId::kQ4_K), 144u);
  EXPECT_EQ(block_elements(GgmlTypeId::kQ6_K), 256u);
  EXPECT_EQ(block_bytes(GgmlTypeId::kQ6_K), 210u);
  EXPECT_EQ(block_elements(GgmlTypeId::kQ5_K), 256u);
  EXPECT_EQ(block_bytes(GgmlTypeId::kQ5_K), 176u);
  EXPECT_EQ(block_elements(GgmlTypeId::kQ5_0), 32u);
  EXPECT_EQ(block_bytes(GgmlTypeId::kQ5_0), 22u);
  EXPECT_EQ(block_elements(GgmlTypeId::kQ5_1), 32u);
  EXPECT_EQ(block_bytes(GgmlTypeId::kQ5_1), 24u);
  EXPECT_EQ(quantized_size(GgmlTypeId::kQ4_K, 1024), 4 * 144u);
  EXPECT_THROW(quantized_size(GgmlTypeId::kQ6_K, 32), InputError);
  EXPECT_THROW(quantized_size(GgmlTypeId::kQ5_K, 32), InputError);
}

TEST(Quantize, RejectsPartialBlocksAndNonFiniteValues) {
  std::vector<float> x(33, 1.0f);
  EXPECT_THROW(quantize(GgmlTypeId::kQ8_0, x.data(), 33), InputError);
  EXPECT_THROW(quantize(GgmlTypeId::kQ4_0, x.data(), 31), InputError);
  EXPECT_NO_THROW(quantize(GgmlTypeId::kF16, x.data(), 33));  // floats have blocks of one
  EXPECT_THROW(dequantize(GgmlTypeId::kQ8_0, std::string(33, '\0'), 32), InputError);
  x[7] = INFINITY;
  EXPECT_THROW(quantize(GgmlTypeId::kQ8_0, x.data(), 32), InputError);
  EXPECT_THROW(quantize(GgmlTypeId::kQ5_1, x.data(), 32), InputError);
  x[7] = std::nanf("");
  EXPECT_THROW(quantize(GgmlTypeId::kQ4_0, x.data(), 32), InputError);
  EXPECT_THROW(quantize(GgmlTypeId::kQ5_0, x.data(), 32), InputError);
  EXPECT_THROW(quantize(GgmlTypeId::kQ5_1, x.data(), 32), InputError);
  EXPECT_EQ(quantize(GgmlTypeId::kQ8_0, x.data(), 0), "");
  std::vector<float> k(256, 0.5f);
  EXPECT_THROW(quantize(GgmlTypeId::kQ4_K, k.data(), 128), InputError);
  EXPECT_THROW(dequantize(GgmlTypeId::kQ6_K, std::string(209, '\0'), 256), InputError);
  k[100] = -INFINITY;
  EXPECT_THROW(quantize(GgmlTypeId::kQ6_K, k.data(), 256), InputError);
  EXPECT_THROW(quantize(GgmlTypeId::kQ5_K, k.data(), 256), InputError);
  k[100] = std::nanf("");
  EXPECT_THROW(quantize(GgmlTypeId::kQ4_K, k.data(), 256), InputError);
  EXPECT_THROW(quantize(GgmlTypeId::kQ5_K, k.data(), 256), InputError);
  EXPECT_THROW(dequantize(GgmlTypeId::kQ5_K, std::string(175, '\0'), 256), InputError);
}

}  // namespace
}  // namespace gpumem::weights
