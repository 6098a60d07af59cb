// ggml's reference codecs, rewritten for speed with the same bytes: each
// block's loops are branch-free over a fixed 32 values so the compiler
// vectorizes them, and nothing is allocated per value.
//
// This file is compiled with -ffp-contract=off (src/CMakeLists.txt): ggml's
// x * id + 8.5f rounds twice, and a fused multiply-add would round once and
// change some nibbles.
#include "gpumem/weights/quantize.h"

#include "gpumem/weights/gguf.h"

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
constexpr size_t kQ5_0Bytes = 2 + 4 + kBlock / 2;
constexpr size_t kQ5_1Bytes = 2 + 2 + 4 + kBlock / 2;

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

// C's conversion of a float to a small integer type, as x86-64 makes it (and
// so the library llama.cpp ships): the truncation to int32, whose "integer
// indefinite" INT32_MIN stands for anything out of range (an infinity, from
// a block whose scale is so small that its inverse overflows), then its low
// bits. Written out because C++ leaves the out-of-range case undefined.
int32_t truncate_x86(float v) {
  constexpr float kLimit = 2147483648.0f;  // 2^31
  return v >= -kLimit && v < kLimit ? static_cast<int32_t>(v) : INT32_MIN;
}

// roundf (halves away from zero), then C's conversion as truncate_x86 makes
// it, without a libm call: the truncation is exact, so is the fraction
// v - t. Beyond 2^31 (an infinite v) the result is INT32_MIN, as ggml's
// int8_t of roundf(v) gets on x86-64.
int32_t round_away(float v) {
  const int32_t t = truncate_x86(v);
  if (t == INT32_MIN) return t;
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

// The block's value of largest magnitude, with its sign. ggml keeps the
// first value whose magnitude beats all before it, which is the first one of
// the largest magnitude.
float signed_abs_max(const float* x) {
  const int32_t amax = abs_max_bits(x);
  for (size_t j = 0; j < kBlock; ++j)
    if ((std::bit_cast<int32_t>(x[j]) & 0x7fffffff) == amax) return x[j];
  return 0.0f;
}

void quantize_q4_0_block(const float* x, char* out) {
  const float max = signed_abs_max(x);
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_u16(out, fp32_to_fp16(d));
  uint8_t q[kBlock];
  // ggml converts to int8_t before the clamp.
  for (size_t j = 0; j < kBlock; ++j)
    q[j] = static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>(truncate_x86(x[j] * id + 8.5f)))));
  for (size_t j = 0; j < kBlock / 2; ++j) out[2 + j] = static_cast<char>(q[j] | q[j + kBlock / 2] << 4);
}

// The 5-bit quants of a block as ggml stores them: low nibbles paired as
// Q4_0's (value j and value j + 16 in byte j), the fifth bits gathered into
// a little-endian uint32 (bit j for value j).
void pack_5bit(const uint8_t* q, char* qh_out, char* qs_out) {
  uint32_t qh = 0;
  for (size_t j = 0; j < kBlock; ++j) qh |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
  for (size_t j = 0; j < 4; ++j) qh_out[j] = static_cast<char>(qh >> (8 * j));
  for (size_t j = 0; j < kBlock / 2; ++j) qs_out[j] = static_cast<char>((q[j] & 0xf) | (q[j + kBlock / 2] & 0xf) << 4);
}

// The 32 quants of a Q5_0/Q5_1 block, pack_5bit's inverse.
void unpack_5bit(const char* qh_in, const char* qs_in, int* q) {
  uint32_t qh = 0;
  for (size_t k = 0; k < 4; ++k) qh |= static_cast<uint32_t>(static_cast<uint8_t>(qh_in[k])) << (8 * k);
  for (size_t j = 0; j < kBlock / 2; ++j) {
    const auto byte = static_cast<uint8_t>(qs_in[j]);
    q[j] = (byte & 0xf) | static_cast<int>((qh >> j) & 1) << 4;
    q[j + kBlock / 2] = (byte >> 4) | static_cast<int>((qh >> (j + kBlock / 2)) & 1) << 4;
  }
}

void quantize_q5_0_block(const float* x, char* out) {
  const float d = signed_abs_max(x) / -16.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_u16(out, fp32_to_fp16(d));
  uint8_t q[kBlock];
  // ggml converts to int8_t before the clamp.
  for (size_t j = 0; j < kBlock; ++j)
    q[j] = static_cast<uint8_t>(std::min(31, static_cast<int>(static_cast<int8_t>(truncate_x86(x[j] * id + 16.5f)))));
  pack_5bit(q, out + 2, out + 6);
}

void quantize_q5_1_block(const float* x, char* out) {
  abs_max_bits(x);  // refuses infinities and NaNs
  float min = x[0], max = x[0];
  for (size_t j = 1; j < kBlock; ++j) {
    min = std::min(min, x[j]);
    max = std::max(max, x[j]);
  }
  const float d = (max - min) / 31.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_u16(out, fp32_to_fp16(d));
  put_u16(out + 2, fp32_to_fp16(min));
  uint8_t q[kBlock];
  // No clamp: (max - min) * id + 0.5 stays below 32, and a 32 would keep
  // only its low five bits, as ggml's would.
  for (size_t j = 0; j < kBlock; ++j) q[j] = static_cast<uint8_t>(truncate_x86((x[j] - min) * id + 0.5f));
  pack_5bit(q, out + 4, out + 8);
}

void dequantize_q5_0_block(const char* block, float* y) {
  const float d = fp16_to_fp32(get_u16(block));
  int q[kBlock];
  unpack_5bit(block + 2, block + 6, q);
  for (size_t j = 0; j < kBlock; ++j) y[j] = static_cast<float>(q[j] - 16) * d;
}

void dequantize_q5_1_block(const char* block, float* y) {
  const float d = fp16_to_fp32(get_u16(block)), m = fp16_to_fp32(get_u16(block + 2));
  int q[kBlock];
  unpack_5bit(block + 4, block + 8, q);
  for (size_t j = 0; j < kBlock; ++j) y[j] = static_cast<float>(q[j]) * d + m;
}

// ---- K-quants: super-blocks of 256 values (ggml-quants.c's *_K_ref). ----
// The float expressions below keep ggml's operand order and types exactly
// (each sum accumulated value by value, int quants converted where ggml
// converts them), since the searches compare sums and one ulp changes a
// chosen scale.

constexpr size_t kSuper = 256;
constexpr size_t kQ4KBytes = 4 + 12 + kSuper / 2;
constexpr size_t kQ5KBytes = 4 + 12 + kSuper / 8 + kSuper / 2;
constexpr size_t kQ6KBytes = kSuper / 2 + kSuper / 4 + kSuper / 16 + 2;
constexpr float kGroupMaxEps = 1e-15f;  // ggml's GROUP_MAX_EPS

// ggml's nearest_int: adding 1.5 * 2^23 leaves round-half-even(v) in the
// low mantissa bits. Kept as the same bit trick, so values outside its range
// (|v| > 2^22, which ggml only asserts against) wrap as ggml's do.
int nearest_int(float v) {
  const float shifted = v + 12582912.0f;
  return (std::bit_cast<int32_t>(shifted) & 0x007fffff) - 0x00400000;
}

void check_finite(const float* x, size_t n) {
  int32_t m = 0;
  for (size_t j = 0; j < n; ++j) m = std::max(m, std::bit_cast<int32_t>(x[j]) & 0x7fffffff);
  if (m >= 0x7f800000) throw InputError("quantize: a value is infinite or NaN");
}

// 4 lanes: one SSE register on baseline x86-64 (and NEON on arm64).
constexpr size_t kLanes = 4;
// GCC/Clang vector extensions: elementwise IEEE operations.
using Floats = float __attribute__((vector_size(4 * kLanes)));
using Ints = int32_t __attribute__((vector_size(4 * kLanes)));

Floats splat(float v) { return Floats{} + v; }
Ints nearest_ints(Floats v) { return (std::bit_cast<Ints>(v + 12582912.0f) & 0x007fffff) - 0x00400000; }
Ints clamp_ints(Ints l, int lo, int hi) {
  l = l < lo ? Ints{} + lo : l;
  return l > hi ? Ints{} + hi : l;
}
Floats to_float(Ints v) { return __builtin_convertvector(v, Floats); }

// make_qx_quants(n = 16, nmax = 32, rmse_type = 1, no importance weights)
// on 4 sub-blocks at once, one per lane, each lane running ggml's sequence
// of float operations (as make_qkx2_scale_min below does): the scale of 16
// values for quants in [-32, 31] that maximizes sum(w*x*l)^2 / sum(w*l^2)
// with w = x^2, over 19 candidate reciprocal scales -(32 + 0.1*is) / max.
// xt[i][k] is value i of sub-block k; Lt gets l + 32, transposed the same.
Floats make_q6_scales(const Floats* xt, Ints* Lt) {
  constexpr int kN = 16, kNmax = 32;
  Floats max{}, amax{};
  for (int i = 0; i < kN; ++i) {
    const Floats ax = std::bit_cast<Floats>(std::bit_cast<Ints>(xt[i]) & 0x7fffffff);
    const Ints bigger = ax > amax;
    amax = bigger ? ax : amax;
    max = bigger ? xt[i] : max;
  }
  const Ints zero = amax < kGroupMaxEps;  // ggml returns early there: L = 0, scale 0; replaced below
  Floats iscale = static_cast<float>(-kNmax) / max;
  Floats sumlx{}, suml2{};
  for (int i = 0; i < kN; ++i) {
    const Ints l = clamp_ints(nearest_ints(iscale * xt[i]), -kNmax, kNmax - 1);
    Lt[i] = l + kNmax;
    const Floats w = xt[i] * xt[i];
    const Floats lf = to_float(l);
    sumlx += w * xt[i] * lf;
    suml2 += w * lf * lf;
  }
  Floats scale = suml2 != 0 ? sumlx / suml2 : Floats{};
  Floats best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(kNmax) + 0.1f * static_cast<float>(is)) / max;
    sumlx = suml2 = Floats{};
    for (int i = 0; i < kN; ++i) {
      const Floats lf = to_float(clamp_ints(nearest_ints(iscale * xt[i]), -kNmax, kNmax - 1));
      const Floats w = xt[i] * xt[i];
      sumlx += w * xt[i] * lf;
      suml2 += w * lf * lf;
    }
    const Ints take = (suml2 > 0) & (sumlx * sumlx > best * suml2);
    bool any = false;
    for (size_t k = 0; k < kLanes; ++k) any |= take[k] != 0;
    if (!any) continue;
    for (int i = 0; i < kN; ++i)
      Lt[i] = take ? clamp_ints(nearest_ints(iscale * xt[i]), -kNmax, kNmax - 1) + kNmax : Lt[i];
    scale = take ? sumlx / suml2 : scale;
    best = take ? scale * sumlx : best;
  }
  for (int i = 0; i < kN; ++i) Lt[i] = zero ? Ints{} : Lt[i];
  return zero ? Floats{} : scale;
}

void quantize_q6_k_block(const float* x, char* out) {
  int8_t L[kSuper];
  float scales[kSuper / 16];
  float max_scale = 0, max_abs_scale = 0;
  for (size_t g = 0; g < kSuper / 16; g += kLanes) {  // sub-blocks g .. g+3 as the lanes
    Floats xt[16];
    Ints Lt[16];
    for (size_t k = 0; k < kLanes; ++k)
      for (size_t i = 0; i < 16; ++i) xt[i][k] = x[16 * (g + k) + i];
    const Floats sc4 = make_q6_scales(xt, Lt);
    for (size_t k = 0; k < kLanes; ++k) {
      scales[g + k] = sc4[k];
      for (size_t i = 0; i < 16; ++i) L[16 * (g + k) + i] = static_cast<int8_t>(Lt[i][k]);
    }
  }
  for (size_t ib = 0; ib < kSuper / 16; ++ib) {
    const float abs_scale = std::fabs(scales[ib]);
    if (abs_scale > max_abs_scale) {
      max_abs_scale = abs_scale;
      max_scale = scales[ib];
    }
  }
  std::memset(out, 0, kQ6KBytes);
  if (max_abs_scale < kGroupMaxEps) return;  // all zero, d = +0
  const float iscale = -128.0f / max_scale;
  const uint16_t dh = fp32_to_fp16(1 / iscale);
  put_u16(out + kQ6KBytes - 2, dh);
  const float dall = fp16_to_fp32(dh);
  int8_t sc[kSuper / 16];
  for (size_t ib = 0; ib < kSuper / 16; ++ib)
    sc[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
  std::memcpy(out + kSuper / 2 + kSuper / 4, sc, sizeof sc);
  for (size_t j = 0; j < kSuper / 16; ++j) {
    const float d = dall * static_cast<float>(sc[j]);
    if (d == 0.0f) continue;  // keeps make_q6_scale's quants, as ggml does
    for (size_t i = 0; i < 16; ++i)
      L[16 * j + i] = static_cast<int8_t>(std::max(-32, std::min(31, nearest_int(x[16 * j + i] / d))) + 32);
  }
  auto* ql = reinterpret_cast<uint8_t*>(out);
  auto* qh = ql + kSuper / 2;
  for (size_t j = 0; j < kSuper; j += 128) {
    for (size_t l = 0; l < 32; ++l) {
      const auto q1 = static_cast<uint8_t>(L[j + l]), q2 = static_cast<uint8_t>(L[j + l + 32]);
      const auto q3 = static_cast<uint8_t>(L[j + l + 64]), q4 = static_cast<uint8_t>(L[j + l + 96]);
      ql[l] = static_cast<uint8_t>((q1 & 0xf) | (q3 & 0xf) << 4);
      ql[l + 32] = static_cast<uint8_t>((q2 & 0xf) | (q4 & 0xf) << 4);
      qh[l] = static_cast<uint8_t>(q1 >> 4 | (q2 >> 4) << 2 | (q3 >> 4) << 4 | (q4 >> 4) << 6);
    }
    ql += 64;
    qh += 32;
  }
}

// make_qkx2_quants(n = 32, nmax, rmin, rdelta = 0.1, nstep, use_mad =
// false) on 4 sub-blocks of a super-block at once: lane k is sub-block k,
// and every lane runs ggml's own sequence of float operations (sums value by
// value, in order), so the bytes stay ggml's while the compiler turns each
// step into one vector operation over the lanes. ggml's branches become
// per-lane selects. For each lane: a scale and a min (returned negated,
// >= 0) for quants in [0, nmax], the weighted least-squares fit that beats
// the others of nstep + 1 candidate grids in weighted squared error. xt and
// wt are the values and weights transposed (xt[i][k] = value i of sub-block
// k); Lt gets the quants, transposed the same way. 3.9x faster than one
// sub-block at a time, since ggml's sums are sequential and cannot be
// vectorized along a sub-block without changing their rounding.
// Q4_K: nmax 15, rmin -1, nstep 20; Q5_K: nmax 31, rmin -0.5, nstep 15.
template <int kNmax, int kSteps>
void make_qkx2_scale_min(const Floats* xt, const Floats* wt, Ints* Lt, float rmin, Floats& scale_out, Floats& the_min) {
  constexpr int kN = 32;
  constexpr float kRdelta = 0.1f;
  Floats min = xt[0], max = xt[0];
  Floats sum_w = wt[0];
  Floats sum_x = sum_w * xt[0];
  for (int i = 1; i < kN; ++i) {
    min = xt[i] < min ? xt[i] : min;
    max = xt[i] > max ? xt[i] : max;
    sum_w += wt[i];
    sum_x += wt[i] * xt[i];
  }
  min = min > 0 ? Floats{} : min;
  const Ints flat = max == min;  // ggml returns early there: L = 0, scale 0; computed anyway, replaced below
  const Floats nmax = splat(static_cast<float>(kNmax));
  Floats scale = 1 / (nmax / (max - min));
  Floats best_error{};
  for (int i = 0; i < kN; ++i) {
    const Floats iscale = nmax / (max - min);
    Lt[i] = clamp_ints(nearest_ints(iscale * (xt[i] - min)), 0, kNmax);
    const Floats diff = scale * to_float(Lt[i]) + min - xt[i];
    best_error += wt[i] * (diff * diff);
  }
  Ints Laux[kN];
  for (int is = 0; is <= kSteps; ++is) {
    // ggml divides by max - min with min as the last accepted fit left it.
    const Floats iscale = (rmin + kRdelta * static_cast<float>(is) + static_cast<float>(kNmax)) / (max - min);
    Floats sum_l{}, sum_l2{}, sum_xl{};
    for (int i = 0; i < kN; ++i) {
      Laux[i] = clamp_ints(nearest_ints(iscale * (xt[i] - min)), 0, kNmax);
      const Floats lf = to_float(Laux[i]);
      sum_l += wt[i] * lf;
      sum_l2 += wt[i] * lf * lf;
      sum_xl += wt[i] * lf * xt[i];
    }
    const Floats D = sum_w * sum_l2 - sum_l * sum_l;
    const Floats s = (sum_w * sum_xl - sum_x * sum_l) / D;
    const Floats m = (sum_l2 * sum_x - sum_l * sum_xl) / D;
    const Floats this_scale = m > 0 ? sum_xl / sum_l2 : s;
    const Floats this_min = m > 0 ? Floats{} : m;
    Floats cur_error{};
    for (int i = 0; i < kN; ++i) {
      const Floats diff = this_scale * to_float(Laux[i]) + this_min - xt[i];
      cur_error += wt[i] * (diff * diff);
    }
    const Ints take = (D > 0) & (cur_error < best_error);
    bool any = false;
    for (size_t k = 0; k < kLanes; ++k) any |= take[k] != 0;
    if (!any) continue;
    best_error = take ? cur_error : best_error;
    scale = take ? this_scale : scale;
    min = take ? this_min : min;
    for (int i = 0; i < kN; ++i) Lt[i] = take ? Laux[i] : Lt[i];
  }
  scale_out = flat ? Floats{} : scale;
  the_min = -min;
  for (int i = 0; i < kN; ++i) Lt[i] = flat ? Ints{} : Lt[i];
}

// What Q4_K and Q5_K share (ggml's quantize_row_q4_K_ref and q5_K_ref differ
// only in the search's constants and the quants' packing): each 32 values'
// scale and min by make_qkx2_scale_min, weighted by av_x + |x|; both as
// 6-bit multiples of fp16 d and dmin in the 16-byte head (d, dmin, 12
// packed bytes); then each value's quant in [0, kNmax] against the rounded
// scale and min, into L.
template <int kNmax, int kSteps>
void quantize_k_scales_mins(const float* x, float rmin, char* head, uint8_t* L) {
  float scales[kSuper / 32], mins[kSuper / 32];
  float max_scale = 0, max_min = 0;
  for (size_t g = 0; g < kSuper / 32; g += kLanes) {  // sub-blocks g .. g+3 as the lanes
    Floats xt[32], wt[32];
    Ints Lt[32];
    for (size_t k = 0; k < kLanes; ++k) {
      const float* xs = x + 32 * (g + k);
      float sum_x2 = 0;
      for (size_t l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
      const float av_x = std::sqrt(sum_x2 / 32);
      for (size_t l = 0; l < 32; ++l) {
        xt[l][k] = xs[l];
        wt[l][k] = av_x + std::fabs(xs[l]);
      }
    }
    Floats scales4, mins4;
    make_qkx2_scale_min<kNmax, kSteps>(xt, wt, Lt, rmin, scales4, mins4);
    for (size_t k = 0; k < kLanes; ++k) {
      scales[g + k] = scales4[k];
      mins[g + k] = mins4[k];
      for (size_t l = 0; l < 32; ++l) L[32 * (g + k) + l] = static_cast<uint8_t>(Lt[l][k]);
    }
  }
  for (size_t j = 0; j < kSuper / 32; ++j) {
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  uint8_t ls[kSuper / 32], lm[kSuper / 32];
  for (size_t j = 0; j < kSuper / 32; ++j) {
    // ggml stores nearest_int's int in a uint8_t before the clamp.
    ls[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
    lm[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
  }
  // The 6-bit packing (get_scale_min_k4's inverse): scales 0-3 and mins 0-3
  // whole in bytes 0-3 and 4-7; scales/mins 4-7 low nibbles in bytes 8-11,
  // their top two bits in bits 6-7 of bytes 0-3 and 4-7.
  uint8_t packed[12];
  for (size_t j = 0; j < 4; ++j) {
    packed[j] = static_cast<uint8_t>(ls[j] | (ls[j + 4] >> 4) << 6);
    packed[j + 4] = static_cast<uint8_t>(lm[j] | (lm[j + 4] >> 4) << 6);
    packed[j + 8] = static_cast<uint8_t>((ls[j + 4] & 0xf) | (lm[j + 4] & 0xf) << 4);
  }
  const uint16_t dh = fp32_to_fp16(max_scale / 63.0f);
  const uint16_t mh = fp32_to_fp16(max_min / 63.0f);
  put_u16(head, dh);
  put_u16(head + 2, mh);
  std::memcpy(head + 4, packed, 12);
  const float dall = fp16_to_fp32(dh), mall = fp16_to_fp32(mh);
  for (size_t j = 0; j < kSuper / 32; ++j) {
    const float d = dall * static_cast<float>(ls[j]);
    if (d == 0.0f) continue;  // keeps the search's quants, as ggml does
    const float dm = mall * static_cast<float>(lm[j]);
    for (size_t i = 0; i < 32; ++i)
      L[32 * j + i] = static_cast<uint8_t>(std::max(0, std::min(kNmax, nearest_int((x[32 * j + i] + dm) / d))));
  }
}

void quantize_q4_k_block(const float* x, char* out) {
  uint8_t L[kSuper];
  quantize_k_scales_mins<15, 20>(x, -1.0f, out, L);
  auto* q = reinterpret_cast<uint8_t*>(out + 16);
  for (size_t j = 0; j < kSuper; j += 64) {
    for (size_t l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | L[j + l + 32] << 4);
    q += 32;
  }
}

void quantize_q5_k_block(const float* x, char* out) {
  uint8_t L[kSuper];
  quantize_k_scales_mins<31, 15>(x, -0.5f, out, L);
  auto* qh = reinterpret_cast<uint8_t*>(out + 16);
  auto* ql = qh + kSuper / 8;
  std::memset(qh, 0, kSuper / 8);
  for (size_t j = 0; j < kSuper; j += 64) {
    const size_t shift = j / 32;  // bits 2k and 2k + 1 of each qh byte for the k-th 64 values
    for (size_t l = 0; l < 32; ++l) {
      const uint8_t lo = L[j + l], hi = L[j + l + 32];
      ql[l] = static_cast<uint8_t>((lo & 0xf) | (hi & 0xf) << 4);
      qh[l] = static_cast<uint8_t>(qh[l] | (lo >> 4) << shift | (hi >> 4) << (shift + 1));
    }
    ql += 32;
  }
}

// The (scale, min) pair j of a Q4_K or Q5_K block's 12 packed bytes.
void q4k_scale_min(const uint8_t* p, size_t j, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = p[j] & 63;
    *m = p[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((p[j + 4] & 0xf) | (p[j - 4] >> 6) << 4);
    *m = static_cast<uint8_t>((p[j + 4] >> 4) | (p[j] >> 6) << 4);
  }
}

void dequantize_q4_k_block(const char* block, float* y) {
  const float d = fp16_to_fp32(get_u16(block)), min = fp16_to_fp32(get_u16(block + 2));
  const auto* sc = reinterpret_cast<const uint8_t*>(block + 4);
  const auto* q = reinterpret_cast<const uint8_t*>(block + 16);
  for (size_t j = 0; j < kSuper / 64; ++j) {
    uint8_t s1, m1, s2, m2;
    q4k_scale_min(sc, 2 * j, &s1, &m1);
    q4k_scale_min(sc, 2 * j + 1, &s2, &m2);
    const float d1 = d * s1, mm1 = min * m1, d2 = d * s2, mm2 = min * m2;
    for (size_t l = 0; l < 32; ++l) y[64 * j + l] = d1 * static_cast<float>(q[32 * j + l] & 0xf) - mm1;
    for (size_t l = 0; l < 32; ++l) y[64 * j + 32 + l] = d2 * static_cast<float>(q[32 * j + l] >> 4) - mm2;
  }
}

void dequantize_q5_k_block(const char* block, float* y) {
  const float d = fp16_to_fp32(get_u16(block)), min = fp16_to_fp32(get_u16(block + 2));
  const auto* sc = reinterpret_cast<const uint8_t*>(block + 4);
  const auto* qh = reinterpret_cast<const uint8_t*>(block + 16);
  const auto* ql = qh + kSuper / 8;
  for (size_t j = 0; j < kSuper / 64; ++j) {
    uint8_t s1, m1, s2, m2;
    q4k_scale_min(sc, 2 * j, &s1, &m1);
    q4k_scale_min(sc, 2 * j + 1, &s2, &m2);
    const float d1 = d * s1, mm1 = min * m1, d2 = d * s2, mm2 = min * m2;
    for (size_t l = 0; l < 32; ++l) {
      const int lo = (ql[32 * j + l] & 0xf) | ((qh[l] >> (2 * j)) & 1) << 4;
      const int hi = (ql[32 * j + l] >> 4) | ((qh[l] >> (2 * j + 1)) & 1) << 4;
      y[64 * j + l] = d1 * static_cast<float>(lo) - mm1;
      y[64 * j + 32 + l] = d2 * static_cast<float>(hi) - mm2;
    }
  }
}

void dequantize_q6_k_block(const char* block, float* y) {
  const auto* ql = reinterpret_cast<const uint8_t*>(block);
  const auto* qh = ql + kSuper / 2;
  const auto* sc = reinterpret_cast<const int8_t*>(block + kSuper / 2 + kSuper / 4);
  const float d = fp16_to_fp32(get_u16(block + kQ6KBytes - 2));
  for (size_t n = 0; n < kSuper; n += 128) {
    for (size_t l = 0; l < 32; ++l) {
      const size_t is = l / 16;
      const int q1 = ((ql[l] & 0xf) | ((qh[l] >> 0) & 3) << 4) - 32;
      const int q2 = ((ql[l + 32] & 0xf) | ((qh[l] >> 2) & 3) << 4) - 32;
      const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
      const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
      y[n + l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
      y[n + l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      y[n + l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      y[n + l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
    ql += 64;
    qh += 32;
    sc += 8;
  }
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

// Block shapes come from the one table of ggml's types (gguf.h); the
// codecs here handle the types GgmlTypeId lists.
static const GgmlType& traits(GgmlTypeId type) {
  const GgmlType* t = ggml_type(static_cast<uint32_t>(type));
  if (!t) throw InputError("quantize: unsupported ggml type " + std::to_string(static_cast<uint32_t>(type)));
  return *t;
}

size_t block_elements(GgmlTypeId type) { return traits(type).block_size; }

size_t block_bytes(GgmlTypeId type) { return traits(type).type_size; }

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
    case GgmlTypeId::kQ5_0:
      for (size_t b = 0; b < n / kBlock; ++b) quantize_q5_0_block(data + b * kBlock, p + b * kQ5_0Bytes);
      break;
    case GgmlTypeId::kQ5_1:
      for (size_t b = 0; b < n / kBlock; ++b) quantize_q5_1_block(data + b * kBlock, p + b * kQ5_1Bytes);
      break;
    case GgmlTypeId::kQ4_K:
      check_finite(data, n);
      for (size_t b = 0; b < n / kSuper; ++b) quantize_q4_k_block(data + b * kSuper, p + b * kQ4KBytes);
      break;
    case GgmlTypeId::kQ5_K:
      check_finite(data, n);
      for (size_t b = 0; b < n / kSuper; ++b) quantize_q5_k_block(data + b * kSuper, p + b * kQ5KBytes);
      break;
    case GgmlTypeId::kQ6_K:
      check_finite(data, n);
      for (size_t b = 0; b < n / kSuper; ++b) quantize_q6_k_block(data + b * kSuper, p + b * kQ6KBytes);
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
    case GgmlTypeId::kQ5_0:
      for (size_t b = 0; b < n / kBlock; ++b) dequantize_q5_0_block(p + b * kQ5_0Bytes, y.data() + b * kBlock);
      break;
    case GgmlTypeId::kQ5_1:
      for (size_t b = 0; b < n / kBlock; ++b) dequantize_q5_1_block(p + b * kQ5_1Bytes, y.data() + b * kBlock);
      break;
    case GgmlTypeId::kQ4_K:
      for (size_t b = 0; b < n / kSuper; ++b) dequantize_q4_k_block(p + b * kQ4KBytes, y.data() + b * kSuper);
      break;
    case GgmlTypeId::kQ5_K:
      for (size_t b = 0; b < n / kSuper; ++b) dequantize_q5_k_block(p + b * kQ5KBytes, y.data() + b * kSuper);
      break;
    case GgmlTypeId::kQ6_K:
      for (size_t b = 0; b < n / kSuper; ++b) dequantize_q6_k_block(p + b * kQ6KBytes, y.data() + b * kSuper);
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
