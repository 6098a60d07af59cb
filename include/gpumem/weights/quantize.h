#pragma once
// Quantization codecs whose bytes equal ggml's reference implementation
// (ggml-quants.c's quantize_row_*_ref, ggml.c's fp32 -> fp16/bf16), so a
// file gpumem writes is the file llama.cpp would write. Checked byte for
// byte against vectors made by ggml itself (tools/ggml_vectors.c).
//
// Block layouts, as ggml-common.h defines them (little-endian):
//   Q8_0: 32 values in 34 bytes: fp16 scale d = amax / 127, then 32 int8
//         q = round(x / d), halves away from zero.
//   Q4_0: 32 values in 18 bytes: fp16 scale d = max / -8, where max is the
//         value of largest magnitude with its sign (the first one on ties),
//         then 16 bytes: byte j holds value j in its low nibble and value
//         j + 16 in its high one, each min(15, trunc(x / d + 8.5)).
//   Q5_0: 32 values in 22 bytes: fp16 d = max / -16 (max as for Q4_0), 4
//         bytes holding each value's fifth bit (bit j: value j), then 16
//         bytes of low nibbles paired as Q4_0's; each quant is
//         min(31, trunc(x / d + 16.5)), value = d*(q - 16).
//   Q5_1: 32 values in 24 bytes: fp16 d = (max - min) / 31, fp16 m = min,
//         then fifth bits and nibbles as Q5_0's; each quant is
//         trunc((x - min) / d + 0.5), value = d*q + m.
//   Q4_K: 256 values in 144 bytes: fp16 d, fp16 dmin, 12 bytes packing
//         eight 6-bit scales and eight 6-bit mins (one each per 32 values),
//         then 128 bytes of nibbles; value = d*scale*q - dmin*min. Each
//         32-value scale and min come from ggml's weighted least-squares
//         search (make_qkx2_quants, 21 candidate scales).
//   Q5_K: 256 values in 176 bytes: Q4_K's 16-byte head (d, dmin, the
//         packed scales and mins), 32 bytes of fifth bits (bit 2k of byte l
//         for value 64k + l, bit 2k+1 for value 64k + 32 + l), 128 bytes of
//         nibbles; value = d*scale*q - dmin*min, q in [0, 31]. The same
//         search as Q4_K's with 16 candidates (rmin -0.5): what ggml's
//         quantize_row_q5_K_ref does, and llama-quantize without an
//         importance matrix (with one, ggml searches otherwise).
//   Q6_K: 256 values in 210 bytes: 128 bytes of low nibbles, 64 of high
//         2-bit pairs, 16 int8 scales (one per 16 values), then fp16 d;
//         value = d*scale*(q - 32). Each 16-value scale comes from ggml's
//         make_qx_quants search (19 candidates, weights x^2).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpumem::weights {

// ggml's type ids (enum ggml_type) of the formats these codecs write.
enum class GgmlTypeId : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kBF16 = 30,
};

// IEEE half precision, round to nearest even; overflow gives infinity and a
// NaN becomes the quiet NaN 0x7e00 with its sign (ggml drops the payload).
uint16_t fp32_to_fp16(float f);
float fp16_to_fp32(uint16_t h);
// bfloat16, round to nearest even (no flush of subnormals); a NaN keeps its
// top bits and is made quiet, as ggml_compute_fp32_to_bf16 does.
uint16_t fp32_to_bf16(float f);
float bf16_to_fp32(uint16_t h);

// Elements per block and bytes per block of `type` (1 and 4/2 for floats).
size_t block_elements(GgmlTypeId type);
size_t block_bytes(GgmlTypeId type);
// Bytes that n values take as `type`; InputError unless n is a whole number
// of blocks.
size_t quantized_size(GgmlTypeId type, size_t n);

// n values as `type`'s bytes. InputError when n is not a whole number of
// blocks (256 values for the K-quants), or (every type but the floats) a
// value is infinite or NaN: ggml's result for those depends on undefined
// float-to-int conversions.
std::string quantize(GgmlTypeId type, const float* data, size_t n);
// Back to floats, as ggml's dequantize_row_* computes them. InputError when
// `bytes` is not exactly quantized_size(type, n).
std::vector<float> dequantize(GgmlTypeId type, std::string_view bytes, size_t n);

// Error of a reconstruction against the original values.
struct QuantError {
  double rmse = 0;
  double max_abs = 0;
};
QuantError quantization_error(const float* original, const float* restored, size_t n);
// quantize then dequantize, and the error of that round trip.
QuantError round_trip_error(GgmlTypeId type, const float* data, size_t n);

}  // namespace gpumem::weights
