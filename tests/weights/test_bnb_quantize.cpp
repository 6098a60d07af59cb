// bitsandbytes' NF4 and int8 codecs against the known-answer vectors of
// tests/data/weights/bnb_vectors.txt (made by tools/bnb_vectors.py, an
// independent float32 re-implementation from bitsandbytes' source: see its
// header), byte for byte; then properties on random inputs (each code is
// the nearest table value, error bounds), the sizes a planner prices, and
// bad input.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpumem/common/error.h"
#include "gpumem/weights/bnb_quantize.h"
#include "weights/hex_bytes.h"

namespace gpumem::weights {
namespace {

using test::floats;
using test::hex;
using test::unhex;

struct Case {
  std::string name;
  size_t n = 0, rows = 0, cols = 0;
  std::map<std::string, std::string> data;  // kind -> bytes
};

struct Vectors {
  std::string dynamic_map;
  std::vector<Case> nf4, int8;
};

Vectors load() {
  std::ifstream in(std::string(GPUMEM_SOURCE_DIR) + "/tests/data/weights/bnb_vectors.txt");
  Vectors v;
  std::map<std::string, Case*> by_name;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string kind, name;
    fields >> kind >> name;
    if (kind == "dynamic_map") {
      std::string h;
      fields >> h;
      v.dynamic_map = unhex(h);
    } else if (kind == "nf4_case") {
      v.nf4.push_back({name});
      fields >> v.nf4.back().n;
    } else if (kind == "int8_case") {
      v.int8.push_back({name});
      fields >> v.int8.back().rows >> v.int8.back().cols;
    } else {
      std::string h;
      fields >> h;
      Case& c = kind.rfind("int8_", 0) == 0 ? v.int8.back() : v.nf4.back();
      EXPECT_EQ(c.name, name) << line.substr(0, 60);
      c.data[kind] = unhex(h);
    }
  }
  return v;
}

const Vectors& vectors() {
  static const Vectors v = load();
  return v;
}

TEST(BnbQuantize, DynamicMapEqualsVectorsAndIsBitsandbytesShape) {
  const auto& map = bnb_dynamic_map();
  ASSERT_EQ(vectors().dynamic_map.size(), 1024u);
  EXPECT_EQ(hex(map.data(), 1024), hex(vectors().dynamic_map));
  EXPECT_TRUE(std::is_sorted(map.begin(), map.end()));
  EXPECT_EQ(map[0], -0.99296875f);  // -(0.9859375 + 1) / 2: the map never reaches -1
  EXPECT_EQ(map[255], 1.0f);
  EXPECT_EQ(std::count(map.begin(), map.end(), 0.0f), 1);
  EXPECT_EQ(std::count_if(map.begin(), map.end(), [](float x) { return x < 0; }), 127);
  EXPECT_NEAR(map[128], 5.5e-7, 1e-12);  // 1e-6 * (0.1 + 1) / 2, the smallest positive value
  // torch 2's linspace (points accumulated in double) gives these; torch
  // 1.13's would give -0.9789062142372131 and 0.4867187738418579.
  EXPECT_EQ(map[1], -0.9789062738418579f);
  EXPECT_EQ(map[218], 0.48671871423721313f);
}

TEST(BnbQuantize, Nf4ThresholdsAreTheTableMidpoints) {
  // Each threshold is the exact midpoint of two table values rounded to a
  // neighbouring float: bitsandbytes writes them as decimal float literals,
  // so 4 of the 15 midpoints (float ties) land on the odd neighbour, which
  // is why they are spelled out rather than computed.
  size_t not_even = 0;
  for (size_t i = 0; i < 15; ++i) {
    const double mid = (static_cast<double>(kNf4Code[i]) + kNf4Code[i + 1]) / 2;
    const double t = kNf4Thresholds[i];
    const double ulp = std::nextafter(kNf4Thresholds[i], 2.0f) - kNf4Thresholds[i];
    EXPECT_LE(std::fabs(t - mid), ulp / 2) << i;
    EXPECT_GT(kNf4Thresholds[i], kNf4Code[i]);
    EXPECT_LT(kNf4Thresholds[i], kNf4Code[i + 1]);
    not_even += kNf4Thresholds[i] != static_cast<float>(mid);
  }
  EXPECT_EQ(not_even, 4u);
}

TEST(BnbQuantize, Nf4EqualsVectors) {
  size_t checked = 0;
  for (const Case& c : vectors().nf4) {
    const auto x = floats(c.data.at("nf4_input"));
    ASSERT_EQ(x.size(), c.n) << c.name;
    const Nf4Quantized q = quantize_nf4(x.data(), x.size(), false);
    EXPECT_EQ(hex(q.packed), hex(c.data.at("nf4_packed"))) << c.name;
    EXPECT_EQ(hex(q.absmax), hex(c.data.at("nf4_absmax"))) << c.name;
    EXPECT_TRUE(q.absmax_code.empty() && q.absmax2.empty());
    if (c.data.count("nf4_dequant")) EXPECT_EQ(hex(dequantize_nf4(q)), hex(c.data.at("nf4_dequant"))) << c.name;
    ++checked;
  }
  EXPECT_GE(checked, 19u);
}

TEST(BnbQuantize, Nf4DoubleQuantEqualsVectors) {
  size_t checked = 0, two_nested = 0;
  for (const Case& c : vectors().nf4) {
    const auto x = floats(c.data.at("nf4_input"));
    const Nf4Quantized q = quantize_nf4(x.data(), x.size(), true);
    EXPECT_EQ(hex(q.packed), hex(c.data.at("nf4_packed"))) << c.name;  // the codes do not change
    EXPECT_TRUE(q.absmax.empty());
    EXPECT_EQ(hex(q.absmax_code), hex(c.data.at("dq_absmax_q"))) << c.name;
    EXPECT_EQ(hex(q.absmax2), hex(c.data.at("dq_absmax2"))) << c.name;
    EXPECT_EQ(hex(&q.offset, 4), hex(c.data.at("dq_offset"))) << c.name;
    if (c.data.count("dq_dequant")) EXPECT_EQ(hex(dequantize_nf4(q)), hex(c.data.at("dq_dequant"))) << c.name;
    // Where the file has no dequantized values (the large case), rebuild
    // them from the file's own statistics.
    if (!c.data.count("dq_dequant")) {
      const auto codes = c.data.at("dq_absmax_q");
      const auto a2 = floats(c.data.at("dq_absmax2"));
      const float offset = floats(c.data.at("dq_offset"))[0];
      const auto y = dequantize_nf4(q);
      const auto& packed = c.data.at("nf4_packed");
      for (size_t i = 0; i < c.n; ++i) {
        const auto byte = static_cast<uint8_t>(packed[i / 2]);
        const int code = i % 2 ? byte & 15 : byte >> 4;
        const float scaled = bnb_dynamic_map()[static_cast<uint8_t>(codes[i / 64])] * a2[i / 64 / 256];
        const float absmax = scaled + offset;
        const float want = kNf4Code[code] * absmax;
        ASSERT_EQ(hex(&y[i], 4), hex(&want, 4)) << c.name << " " << i;
      }
    }
    two_nested += q.absmax2.size() >= 2;
    ++checked;
  }
  EXPECT_GE(checked, 19u);
  EXPECT_GE(two_nested, 1u);
}

TEST(BnbQuantize, Int8RowwiseEqualsVectors) {
  size_t checked = 0;
  for (const Case& c : vectors().int8) {
    const auto x = floats(c.data.at("int8_input"));
    ASSERT_EQ(x.size(), c.rows * c.cols) << c.name;
    const Int8RowQuantized q = quantize_int8_rowwise(x.data(), c.rows, c.cols);
    EXPECT_EQ(hex(q.q), hex(c.data.at("int8_q"))) << c.name;
    EXPECT_EQ(hex(q.row_absmax), hex(c.data.at("int8_absmax"))) << c.name;
    EXPECT_EQ(hex(dequantize_int8_rowwise(q)), hex(c.data.at("int8_dequant"))) << c.name;
    ++checked;
  }
  EXPECT_GE(checked, 8u);
}

TEST(BnbQuantize, Nf4NibbleOrderAndPadding) {
  // The first value in the high nibble: 1 is code 15, -1 code 0.
  const float x[] = {1.0f, -1.0f, 0.0f};
  const Nf4Quantized q = quantize_nf4(x, 3, false);
  ASSERT_EQ(q.packed.size(), 2u);
  EXPECT_EQ(static_cast<uint8_t>(q.packed[0]), 0xf0);
  EXPECT_EQ(static_cast<uint8_t>(q.packed[1]), 0x77);  // 0 is code 7, and so is the padding
  // An all-zero block: 0 * (1 / 0) is NaN, which the tree sends to code 0,
  // padding included; it dequantizes to (negative) zero.
  const float z[] = {0.0f, -0.0f, 0.0f};
  const Nf4Quantized qz = quantize_nf4(z, 3, false);
  EXPECT_EQ(hex(qz.packed), "0000");
  EXPECT_EQ(qz.absmax[0], 0.0f);
  for (float y : dequantize_nf4(qz)) EXPECT_EQ(y, 0.0f);
}

TEST(BnbQuantize, Nf4ValueOnAThresholdTakesTheLowerCode) {
  std::vector<float> x(64, 0.0f);
  x[0] = 1.0f;  // absmax 1: x * inv is x
  for (size_t i = 0; i < 15; ++i) {
    x[1 + 2 * i] = kNf4Thresholds[i];
    x[2 + 2 * i] = std::nextafter(kNf4Thresholds[i], 2.0f);
  }
  const Nf4Quantized q = quantize_nf4(x.data(), x.size(), false);
  auto code = [&](size_t i) {
    const auto byte = static_cast<uint8_t>(q.packed[i / 2]);
    return i % 2 ? byte & 15 : byte >> 4;
  };
  for (size_t i = 0; i < 15; ++i) {
    EXPECT_EQ(code(1 + 2 * i), static_cast<int>(i)) << i;
    EXPECT_EQ(code(2 + 2 * i), static_cast<int>(i + 1)) << i;
  }
}

// Random blocks at scales from 1e-6 to 1e6, a few with an outlier, and an
// odd count so the last block is partial.
std::vector<float> random_values(uint32_t seed, size_t n = 64 * 300 + 45) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<double> exponent(-6, 6);
  std::vector<float> x(n);
  for (size_t b = 0; b < n; b += 64) {
    const float scale = static_cast<float>(std::pow(10.0, exponent(rng)));
    for (size_t j = b; j < std::min(n, b + 64); ++j) x[j] = normal(rng) * scale;
    if (b / 64 % 7 == 3) x[b] *= 40;
  }
  return x;
}

float widest_nf4_gap() {
  float gap = 0;
  for (size_t i = 0; i < 15; ++i) gap = std::max(gap, kNf4Code[i + 1] - kNf4Code[i]);
  return gap;
}

TEST(BnbQuantize, Nf4CodesAreTheNearestTableValues) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    const auto x = random_values(seed);
    const Nf4Quantized q = quantize_nf4(x.data(), x.size(), false);
    const auto y = dequantize_nf4(q);
    const double half_gap = widest_nf4_gap() / 2.0;
    for (size_t i = 0; i < x.size(); ++i) {
      const float absmax = q.absmax[i / 64];
      const double s = static_cast<double>(x[i]) / absmax;
      const auto byte = static_cast<uint8_t>(q.packed[i / 2]);
      const int code = i % 2 ? byte & 15 : byte >> 4;
      const double mine = std::fabs(s - kNf4Code[code]);
      for (int k = 0; k < 16; ++k) {
        // 1e-6: the float thresholds and x * (1 / absmax) round a little
        // away from the exact midpoints and quotient.
        ASSERT_LE(mine, std::fabs(s - kNf4Code[k]) + 1e-6) << "seed " << seed << " value " << i << " code " << code;
      }
      ASSERT_LE(std::fabs(static_cast<double>(x[i]) - y[i]), (half_gap + 1e-6) * absmax) << i;
    }
  }
}

TEST(BnbQuantize, Nf4DoubleQuantRecoversTheAbsmaxes) {
  const auto& map = bnb_dynamic_map();
  // The widest step of the map, counting the stretch from -1 to its first
  // value (x * inv reaches -1, the map stops at -0.99296875).
  float gap = map[0] + 1.0f;
  for (size_t i = 0; i < 255; ++i) gap = std::max(gap, map[i + 1] - map[i]);
  EXPECT_NEAR(gap, 0.0140625, 1e-6);
  for (uint32_t seed : {4u, 5u}) {
    const auto x = random_values(seed, 64 * 700 + 3);  // 701 blocks: 3 nested blocks
    const Nf4Quantized plain = quantize_nf4(x.data(), x.size(), false);
    const Nf4Quantized dq = quantize_nf4(x.data(), x.size(), true);
    ASSERT_EQ(dq.absmax2.size(), 3u);
    EXPECT_EQ(dq.packed, plain.packed);
    const auto recovered = nf4_block_absmax(dq);
    double mean = 0;
    for (float a : plain.absmax) mean += a;
    mean /= static_cast<double>(plain.absmax.size());
    EXPECT_EQ(dq.offset, static_cast<float>(mean));
    for (size_t b = 0; b < recovered.size(); ++b) {
      const double bound = gap / 2.0 * dq.absmax2[b / 256] * (1 + 1e-5) + std::fabs(dq.offset) * 1e-6;
      ASSERT_LE(std::fabs(static_cast<double>(recovered[b]) - plain.absmax[b]), bound) << "block " << b;
    }
  }
}

double rmse(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
  return std::sqrt(s / static_cast<double>(a.size()));
}

TEST(BnbQuantize, RoundTripErrorOnWeightLikeValues) {
  // One scale, as weights are: NF4's RMSE on normal data is about 0.1 of
  // its absmax-normalized spread; double quantization adds little; int8
  // per row beats both by far.
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> x(64 * 1024);
  for (float& v : x) v = normal(rng);
  const auto nf4 = dequantize_nf4(quantize_nf4(x.data(), x.size(), false));
  const auto dq = dequantize_nf4(quantize_nf4(x.data(), x.size(), true));
  const auto i8 = dequantize_int8_rowwise(quantize_int8_rowwise(x.data(), 64, 1024));
  const double e4 = rmse(x, nf4), edq = rmse(x, dq), e8 = rmse(x, i8);
  EXPECT_GT(e4, 0.0);
  EXPECT_LT(e4, 0.15 * 0.02);
  EXPECT_LT(edq, 1.02 * e4);
  EXPECT_LT(e8, e4 / 5);
}

TEST(BnbQuantize, Int8WithinHalfAStep) {
  for (uint32_t seed : {8u, 9u}) {
    const size_t rows = 37, cols = 301;
    const auto x = random_values(seed, rows * cols);
    const Int8RowQuantized q = quantize_int8_rowwise(x.data(), rows, cols);
    const auto y = dequantize_int8_rowwise(q);
    for (size_t r = 0; r < rows; ++r) {
      const float absmax = q.row_absmax[r];
      bool reaches_127 = false;
      for (size_t j = 0; j < cols; ++j) {
        const int v = q.q[r * cols + j];
        ASSERT_LE(std::abs(v), 127);
        reaches_127 |= std::abs(v) == 127;
        // Half a step of absmax / 127, plus the float roundings of the scale.
        ASSERT_LE(std::fabs(static_cast<double>(x[r * cols + j]) - y[r * cols + j]), absmax / 127.0 * (0.5 + 1e-4))
            << r << " " << j;
        ASSERT_EQ(v, static_cast<int>(std::nearbyint(x[r * cols + j] * ((1.0f / absmax) * 127.0f))));
      }
      EXPECT_TRUE(reaches_127) << "row " << r;
    }
  }
}

TEST(BnbQuantize, Int8ZeroRowsAndTies) {
  // A row of zeros: absmax 0, codes 0, back to zeros.
  const float zeros[] = {0.0f, -0.0f, 0.0f, 0.0f, 2.0f, 1.0f, -0.5f, 1.5f / 127};
  const Int8RowQuantized q = quantize_int8_rowwise(zeros, 2, 4);
  EXPECT_EQ(q.row_absmax[0], 0.0f);
  EXPECT_EQ(hex(q.q), "00000000" + hex(std::vector<int8_t>{127, 64, -32, 1}));  // 63.5 -> 64, 31.75 -> 32, 0.75 -> 1
  for (size_t j = 0; j < 4; ++j) EXPECT_EQ(dequantize_int8_rowwise(q)[j], 0.0f);
  // absmax 127: the scale is (1/127)*127 = 1 in float, so k + 0.5 rounds to even.
  const float ties[] = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f};
  const Int8RowQuantized t = quantize_int8_rowwise(ties, 1, 8);
  ASSERT_EQ((1.0f / 127.0f) * 127.0f, 1.0f);
  EXPECT_EQ(hex(t.q), hex(std::vector<int8_t>{127, 0, 2, 2, 0, -2, -2, 126}));
}

TEST(BnbQuantize, SizesAndTheQloraBitsPerWeight) {
  EXPECT_DOUBLE_EQ(nf4_bits_per_weight(false), 4.5);
  EXPECT_DOUBLE_EQ(nf4_bits_per_weight(true), 4.126953125);  // QLoRA: 8/64 + 32/(64*256) = 0.127
  EXPECT_NEAR(nf4_bits_per_weight(true), 4.127, 5e-4);
  EXPECT_EQ(nf4_bytes(64, false), 32u + 4);
  EXPECT_EQ(nf4_bytes(65, false), 33u + 8);
  EXPECT_EQ(nf4_bytes(64, true), 32u + 1 + 4 + 4);
  EXPECT_EQ(nf4_bytes(64 * 257, true), 32u * 257 + 257 + 8 + 4);
  EXPECT_EQ(nf4_bytes(0, false), 0u);
  EXPECT_EQ(nf4_bytes(0, true), 0u);
  EXPECT_EQ(int8_rowwise_bytes(4096, 11008), 4096u * 11008 + 4 * 4096);
  // A Llama-7B-sized matrix (4096 x 11008): the per-weight figures hold.
  const size_t n = 4096u * 11008;
  EXPECT_DOUBLE_EQ(8.0 * static_cast<double>(nf4_bytes(n, false)) / static_cast<double>(n), 4.5);
  EXPECT_NEAR(8.0 * static_cast<double>(nf4_bytes(n, true)) / static_cast<double>(n), 4.127, 5e-4);
  // The sizes equal what the codecs return.
  for (size_t count : {1u, 63u, 64u, 65u, 64u * 256 + 1}) {
    const std::vector<float> x(count, 0.25f);
    const Nf4Quantized p = quantize_nf4(x.data(), count, false);
    EXPECT_EQ(p.packed.size() + 4 * p.absmax.size(), nf4_bytes(count, false)) << count;
    const Nf4Quantized d = quantize_nf4(x.data(), count, true);
    EXPECT_EQ(d.packed.size() + d.absmax_code.size() + 4 * d.absmax2.size() + 4, nf4_bytes(count, true)) << count;
  }
  const std::vector<float> m(3 * 5, 1.0f);
  const Int8RowQuantized q = quantize_int8_rowwise(m.data(), 3, 5);
  EXPECT_EQ(q.q.size() + 4 * q.row_absmax.size(), int8_rowwise_bytes(3, 5));
}

TEST(BnbQuantize, RejectsNonFiniteValuesAndMismatchedParts) {
  std::vector<float> x(200, 0.5f);
  x[190] = std::numeric_limits<float>::infinity();  // in the partial last block
  EXPECT_THROW(quantize_nf4(x.data(), x.size(), false), InputError);
  EXPECT_NO_THROW(quantize_nf4(x.data(), 190, false));
  x[190] = 0.5f;
  x[70] = std::nanf("");
  EXPECT_THROW(quantize_nf4(x.data(), x.size(), true), InputError);
  EXPECT_THROW(quantize_int8_rowwise(x.data(), 2, 100), InputError);
  x[70] = -std::numeric_limits<float>::infinity();
  EXPECT_THROW(quantize_int8_rowwise(x.data(), 4, 50), InputError);
  // A row whose absmax is so small that 127 / absmax overflows.
  const float tiny[] = {1e-38f, 0.0f, 1.0f, 0.5f};
  EXPECT_THROW(quantize_int8_rowwise(tiny, 2, 2), InputError);
  EXPECT_NO_THROW(quantize_nf4(tiny, 4, true));  // NF4 only compares: fine
  // Nothing in, nothing out.
  const Nf4Quantized empty = quantize_nf4(nullptr, 0, true);
  EXPECT_TRUE(empty.packed.empty() && empty.absmax_code.empty() && empty.absmax2.empty());
  EXPECT_TRUE(dequantize_nf4(empty).empty());
  // Parts that do not fit the count.
  std::vector<float> ok(100, 0.25f);
  Nf4Quantized q = quantize_nf4(ok.data(), ok.size(), false);
  q.absmax.pop_back();
  EXPECT_THROW(dequantize_nf4(q), InputError);
  Nf4Quantized d = quantize_nf4(ok.data(), ok.size(), true);
  d.packed.push_back('\0');
  EXPECT_THROW(dequantize_nf4(d), InputError);
  d.packed.pop_back();
  d.absmax2.clear();
  EXPECT_THROW(nf4_block_absmax(d), InputError);
  Int8RowQuantized r = quantize_int8_rowwise(ok.data(), 10, 10);
  r.row_absmax.resize(9);
  EXPECT_THROW(dequantize_int8_rowwise(r), InputError);
}

}  // namespace
}  // namespace gpumem::weights
