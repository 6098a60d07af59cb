// ggml's reference codecs, rewritten for speed with the same bytes: each
// block's loops are branch-free over a fixed 32 values so the compiler
// vectorizes them, and nothing is allocated per value.
//
// This file is compiled with -ffp-contract=off (src/CMakeLists.txt): ggml's
// x * id + 8.5f rounds twice, and a fused multiply-add would round once and
// change some nibbles.
#include "gpumem/weights/quantize.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "gpumem/common/error.h"

namespace gpumem::weights {
namespace {

constexpr size_t kBlock = 32;
constexpr size_t kQ8Bytes = 2 + kBlock;
constexpr size_t kQ4Bytes = 2 + kBlock / 2;

void put_u16(char* out, uint16_t v) {
  out[0] = static_cast<char>(v & 0xff);
  out[1] = static_cast<char>(v >> 8);
}
uint16_t get_u16(const char* in) {
  return static_cast<uint16_t>(static_cast<uint8_t>(in[0]) | static_cast<uint8_t>(in[1]) << 8);
}

// The largest |x| of a block, as its bit pattern: for finite floats the
// order of |x|'s bits is the order of the magnitudes, and an integer max
// vectorizes where a float one (NaN rules) does not.
int32_t abs_max_bits(const float* x) {
  int32_t m = 0;
  for (size_t j = 0; j < kBlock; ++j) m = std::max(m, std::bit_cast<int32_t>(x[j]) & 0x7fffffff);
  if (m >= 0x7f800000) throw InputError("quantize: a value is infinite or NaN");
  return m;
}

// roundf (halves away from zero) for |v| < 2^31, without a libm call: the
// truncation is exact, so is the fraction v - t.
int32_t round_away(float v) {
  const auto t = static_cast<int32_t>(v);
  const float frac = v - static_cast<float>(t);
  return t + (frac >= 0.5f ? 1 : 0) - (frac <= -0.5f ? 1 : 0);
}

void quantize_q8_0_block(const float* x, char* out) {
  const float amax = std::bit_cast<float>(abs_max_bits(x));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_u16(out, fp32_to_fp16(d));
  int8_t q[kBlock];
  for (size_t j = 0; j < kBlock; ++j) q[j] = static_cast<int8_t>(round_away(x[j] * id));
  std::memcpy(out + 2, q, kBlock);
}

void quantize_q4_0_block(const float* x, char* out) {
  // ggml keeps the first value whose magnitude beats all before it, which is
  // the first one of the largest magnitude.
  const int32_t amax = abs_max_bits(x);
  float max = 0.0f;
  for (size_t j = 0; j < kBlock; ++j)
    if ((std::bit_cast<int32_t>(x[j]) & 0x7fffffff) == amax) {
      max = x[j];
      break;
    }
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_u16(out, fp32_to_fp16(d));
  uint8_t q[kBlock];
  for (size_t j = 0; j < kBlock; ++j) q[j] = static_cast<uint8_t>(std::min(15, static_cast<int>(x[j] * id + 8.5f)));
  for (size_t j = 0; j < kBlock / 2; ++j) out[2 + j] = static_cast<char>(q[j] | q[j + kBlock / 2] << 4);
}

}  // namespace

uint16_t fp32_to_fp16(float f) {
  const auto x = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t a = x & 0x7fffffff;
  if (a > 0x7f800000) return sign | 0x7e00;   // NaN
  if (a >= 0x477ff000) return sign | 0x7c00;  // 65520 and up round to infinity
  if (a >= 0x38800000) {                      // a normal half: rebias, round 13 bits off
    const uint32_t r = a - 0x38000000;
    return static_cast<uint16_t>(sign | ((r + 0xfff + ((r >> 13) & 1)) >> 13));
  }
  // A half subnormal (or zero): the value in units of 2^-24, rounded.
  const uint32_t exponent = a >> 23;
  if (exponent < 102) return sign;  // below 2^-25, half the smallest subnormal
  const uint32_t mantissa = (a & 0x7fffff) | 0x800000;
  const uint32_t shift = 126 - exponent;  // 14..24
  const uint32_t q = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  return static_cast<uint16_t>(sign | (q + (rest > half || (rest == half && (q & 1)) ? 1 : 0)));
}

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ff;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000 | mantissa << 13);
  if (exponent != 0) return std::bit_cast<float>(sign | (exponent + 112) << 23 | mantissa << 13);
  // Subnormal (or zero): exact in float as mantissa * 2^-24.
  const float v = static_cast<float>(mantissa) * 0x1p-24f;
  return sign ? -v : v;
}

uint16_t fp32_to_bf16(float f) {
  const auto x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  return static_cast<uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

float bf16_to_fp32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

size_t block_elements(GgmlTypeId type) { return type == GgmlTypeId::kQ8_0 || type == GgmlTypeId::kQ4_0 ? kBlock : 1; }

size_t block_bytes(GgmlTypeId type) {
  switch (type) {
    case GgmlTypeId::kF32: return 4;
    case GgmlTypeId::kF16:
    case GgmlTypeId::kBF16: return 2;
    case GgmlTypeId::kQ8_0: return kQ8Bytes;
    case GgmlTypeId::kQ4_0: return kQ4Bytes;
  }
  throw InputError("quantize: unsupported ggml type " + std::to_string(static_cast<uint32_t>(type)));
}

size_t quantized_size(GgmlTypeId type, size_t n) {
  const size_t per = block_elements(type);
  if (n % per != 0)
    throw InputError("quantize: " + std::to_string(n) + " values are not a whole number of " + std::to_string(per) +
                     "-value blocks");
  return n / per * block_bytes(type);
}

std::string quantize(GgmlTypeId type, const float* data, size_t n) {
  std::string out(quantized_size(type, n), '\0');
  char* p = out.data();
  switch (type) {
    case GgmlTypeId::kF32: std::memcpy(p, data, n * 4); break;  // gpumem targets little-endian hosts
    case GgmlTypeId::kF16:
      for (size_t i = 0; i < n; ++i) put_u16(p + 2 * i, fp32_to_fp16(data[i]));
      break;
    case GgmlTypeId::kBF16:
      for (size_t i = 0; i < n; ++i) put_u16(p + 2 * i, fp32_to_bf16(data[i]));
      break;
    case GgmlTypeId::kQ8_0:
      for (size_t b = 0; b < n / kBlock; ++b) quantize_q8_0_block(data + b * kBlock, p + b * kQ8Bytes);
      break;
    case GgmlTypeId::kQ4_0:
      for (size_t b = 0; b < n / kBlock; ++b) quantize_q4_0_block(data + b * kBlock, p + b * kQ4Bytes);
      break;
  }
  return out;
}

std::vector<float> dequantize(GgmlTypeId type, std::string_view bytes, size_t n) {
  if (bytes.size() != quantized_size(type, n))
    throw InputError("dequantize: " + std::to_string(bytes.size()) + " bytes, expected " +
                     std::to_string(quantized_size(type, n)) + " for " + std::to_string(n) + " values");
  std::vector<float> y(n);
  const char* p = bytes.data();
  switch (type) {
    case GgmlTypeId::kF32: std::memcpy(y.data(), p, n * 4); break;
    case GgmlTypeId::kF16:
      for (size_t i = 0; i < n; ++i) y[i] = fp16_to_fp32(get_u16(p + 2 * i));
      break;
    case GgmlTypeId::kBF16:
      for (size_t i = 0; i < n; ++i) y[i] = bf16_to_fp32(get_u16(p + 2 * i));
      break;
    case GgmlTypeId::kQ8_0:
      for (size_t b = 0; b < n / kBlock; ++b) {
        const char* block = p + b * kQ8Bytes;
        const float d = fp16_to_fp32(get_u16(block));
        for (size_t j = 0; j < kBlock; ++j)
          y[b * kBlock + j] = static_cast<float>(static_cast<int8_t>(block[2 + j])) * d;
      }
      break;
    case GgmlTypeId::kQ4_0:
      for (size_t b = 0; b < n / kBlock; ++b) {
        const char* block = p + b * kQ4Bytes;
        const float d = fp16_to_fp32(get_u16(block));
        for (size_t j = 0; j < kBlock / 2; ++j) {
          const auto byte = static_cast<uint8_t>(block[2 + j]);
          y[b * kBlock + j] = static_cast<float>((byte & 0xf) - 8) * d;
          y[b * kBlock + j + kBlock / 2] = static_cast<float>((byte >> 4) - 8) * d;
        }
      }
      break;
  }
  return y;
}

QuantError quantization_error(const float* original, const float* restored, size_t n) {
  QuantError e;
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    const double diff = std::fabs(static_cast<double>(original[i]) - restored[i]);
    sum += diff * diff;
    e.max_abs = std::max(e.max_abs, diff);
  }
  e.rmse = n ? std::sqrt(sum / static_cast<double>(n)) : 0.0;
  return e;
}

QuantError round_trip_error(GgmlTypeId type, const float* data, size_t n) {
  const std::vector<float> back = dequantize(type, quantize(type, data, n), n);
  return quantization_error(data, back.data(), n);
}

}  // namespace gpumem::weights
