// bitsandbytes' NF4 (with and without double quantization) and int8 per-row
// codecs. The float operations follow bitsandbytes' order one for one (see
// the header), and this file is compiled with -ffp-contract=off
// (src/CMakeLists.txt): the nested dequantization map[c] * absmax2 + offset
// rounds twice in bitsandbytes, and a fused multiply-add would round once.
#include "gpumem/weights/bnb_quantize.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "gpumem/common/error.h"

namespace gpumem::weights {

// The NF4 table: QLoRA paper (arXiv 2305.14314) appendix E, the same floats
// as bitsandbytes' csrc (dDequantizeNF4) and bitsandbytes/functional.py.
const std::array<float, 16> kNf4Code = {
    -1.0f,
    -0.6961928009986877f,
    -0.5250730514526367f,
    -0.39491748809814453f,
    -0.28444138169288635f,
    -0.18477343022823334f,
    -0.09105003625154495f,
    0.0f,
    0.07958029955625534f,
    0.16093020141124725f,
    0.24611230194568634f,
    0.33791524171829224f,
    0.44070982933044434f,
    0.5626170039176941f,
    0.7229568362236023f,
    1.0f,
};

// The constants of bitsandbytes' dQuantizeNF4 decision tree (csrc/kernels.cu,
// csrc/cuda/blockwise_quantization.cu), sorted: each is the midpoint of two
// neighbouring table values, written as a float literal there as here (the
// compiler rounds the decimal straight to float; 4 of the midpoints are
// float ties, and their decimals put them on the odd neighbour). The tree
// tests "x > threshold" at every node, so its code is the number of
// thresholds x exceeds.
const std::array<float, 15> kNf4Thresholds = {
    -0.8480964004993439f,  -0.6106329262256622f,   -0.4599952697753906f, -0.33967943489551544f, -0.23460740596055984f,
    -0.13791173323988914f, -0.045525018125772476f, 0.03979014977812767f, 0.1202552504837513f,   0.2035212516784668f,
    0.2920137718319893f,   0.3893125355243683f,    0.5016634166240692f,  0.6427869200706482f,   0.8614784181118011f,
};

namespace {

// create_dynamic_map(signed=True, 7, 8)'s float32 values, as bit patterns:
// the means of neighbouring points of torch.linspace(0.1, 1, 2^i + 1) times
// 10^(i - 6) for i = 0..6, both signs, plus 0 and 1, sorted. Written out
// (by tools/bnb_vectors.py) rather than recomputed, since the last bits
// depend on torch's float32 linspace: these are torch 2's (each point
// accumulated in double), the map bitsandbytes is known by; torch 1.13's
// differs in 42 values by an ulp or two. The test checks them against the
// vectors file.
constexpr uint32_t kDynamicMapBits[256] = {
    0xbf7e3333, 0xbf7a999a, 0xbf770000, 0xbf736666, 0xbf6fcccd, 0xbf6c3333, 0xbf68999a, 0xbf650000, 0xbf616666,
    0xbf5dcccd, 0xbf5a3333, 0xbf56999a, 0xbf530000, 0xbf4f6666, 0xbf4bcccd, 0xbf483333, 0xbf44999a, 0xbf410000,
    0xbf3d6666, 0xbf39cccd, 0xbf363334, 0xbf32999a, 0xbf2f0000, 0xbf2b6666, 0xbf27cccd, 0xbf243334, 0xbf20999a,
    0xbf1d0000, 0xbf196666, 0xbf15cccd, 0xbf123334, 0xbf0e999a, 0xbf0b0000, 0xbf076666, 0xbf03cccc, 0xbf003333,
    0xbef93332, 0xbef20000, 0xbeeacccc, 0xbee3999a, 0xbedc6666, 0xbed53333, 0xbece0000, 0xbec6cccc, 0xbebf999a,
    0xbeb86666, 0xbeb13333, 0xbeaa0000, 0xbea2cccc, 0xbe9b999a, 0xbe946666, 0xbe8d3334, 0xbe860000, 0xbe7d9999,
    0xbe6f3333, 0xbe60cccd, 0xbe526666, 0xbe440000, 0xbe35999a, 0xbe273333, 0xbe18cccd, 0xbe0a6666, 0xbdf80000,
    0xbddb3334, 0xbdc9eb85, 0xbdc428f7, 0xbdbe6667, 0xbdb8a3d7, 0xbdb2e148, 0xbdad1eb8, 0xbda75c2a, 0xbda1999a,
    0xbd9bd70a, 0xbd96147b, 0xbd9051eb, 0xbd8a8f5d, 0xbd84cccd, 0xbd7e147b, 0xbd728f5d, 0xbd670a3d, 0xbd5b851f,
    0xbd500000, 0xbd447ae1, 0xbd38f5c3, 0xbd2d70a3, 0xbd21eb85, 0xbd166667, 0xbd0ae148, 0xbcfeb852, 0xbce7ae15,
    0xbcd0a3d7, 0xbcb9999a, 0xbca28f5d, 0xbc8b851f, 0xbc68f5c3, 0xbc3ae148, 0xbc1f3b64, 0xbc160418, 0xbc0ccccd,
    0xbc039581, 0xbbf4bc6a, 0xbbe24dd3, 0xbbcfdf3b, 0xbbbd70a4, 0xbbab020d, 0xbb989374, 0xbb8624dd, 0xbb676c8a,
    0xbb428f5c, 0xbb1db22d, 0xbaf1a9fc, 0xbaa7ef9d, 0xba7765ff, 0xba59e83e, 0xba3c6a80, 0xba1eecc1, 0xba016f01,
    0xb9c7e283, 0xb98ce705, 0xb923d70b, 0xb8ba1f4b, 0xb88aefb3, 0xb8378034, 0xb7b24206, 0xb70205ff, 0xb65a1a94,
    0xb513a3b7, 0x00000000, 0x3513a3b7, 0x365a1a94, 0x370205ff, 0x37b24206, 0x38378034, 0x388aefb3, 0x38ba1f4b,
    0x3923d70b, 0x398ce705, 0x39c7e283, 0x3a016f01, 0x3a1eecc1, 0x3a3c6a80, 0x3a59e83e, 0x3a7765ff, 0x3aa7ef9d,
    0x3af1a9fc, 0x3b1db22d, 0x3b428f5c, 0x3b676c8a, 0x3b8624dd, 0x3b989374, 0x3bab020d, 0x3bbd70a4, 0x3bcfdf3b,
    0x3be24dd3, 0x3bf4bc6a, 0x3c039581, 0x3c0ccccd, 0x3c160418, 0x3c1f3b64, 0x3c3ae148, 0x3c68f5c3, 0x3c8b851f,
    0x3ca28f5d, 0x3cb9999a, 0x3cd0a3d7, 0x3ce7ae15, 0x3cfeb852, 0x3d0ae148, 0x3d166667, 0x3d21eb85, 0x3d2d70a3,
    0x3d38f5c3, 0x3d447ae1, 0x3d500000, 0x3d5b851f, 0x3d670a3d, 0x3d728f5d, 0x3d7e147b, 0x3d84cccd, 0x3d8a8f5d,
    0x3d9051eb, 0x3d96147b, 0x3d9bd70a, 0x3da1999a, 0x3da75c2a, 0x3dad1eb8, 0x3db2e148, 0x3db8a3d7, 0x3dbe6667,
    0x3dc428f7, 0x3dc9eb85, 0x3ddb3334, 0x3df80000, 0x3e0a6666, 0x3e18cccd, 0x3e273333, 0x3e35999a, 0x3e440000,
    0x3e526666, 0x3e60cccd, 0x3e6f3333, 0x3e7d9999, 0x3e860000, 0x3e8d3334, 0x3e946666, 0x3e9b999a, 0x3ea2cccc,
    0x3eaa0000, 0x3eb13333, 0x3eb86666, 0x3ebf999a, 0x3ec6cccc, 0x3ece0000, 0x3ed53333, 0x3edc6666, 0x3ee3999a,
    0x3eeacccc, 0x3ef20000, 0x3ef93332, 0x3f003333, 0x3f03cccc, 0x3f076666, 0x3f0b0000, 0x3f0e999a, 0x3f123334,
    0x3f15cccd, 0x3f196666, 0x3f1d0000, 0x3f20999a, 0x3f243334, 0x3f27cccd, 0x3f2b6666, 0x3f2f0000, 0x3f32999a,
    0x3f363334, 0x3f39cccd, 0x3f3d6666, 0x3f410000, 0x3f44999a, 0x3f483333, 0x3f4bcccd, 0x3f4f6666, 0x3f530000,
    0x3f56999a, 0x3f5a3333, 0x3f5dcccd, 0x3f616666, 0x3f650000, 0x3f68999a, 0x3f6c3333, 0x3f6fcccd, 0x3f736666,
    0x3f770000, 0x3f7a999a, 0x3f7e3333, 0x3f800000,
};

// The largest |x| of n values, as its bit pattern (the order of |x|'s bits
// is the order of finite magnitudes, and an integer max vectorizes).
int32_t abs_max_bits(const float* x, size_t n) {
  int32_t m = 0;
  for (size_t j = 0; j < n; ++j) m = std::max(m, std::bit_cast<int32_t>(x[j]) & 0x7fffffff);
  return m;
}

void check_finite_bits(int32_t abs_max_bits_value, const char* what) {
  if (abs_max_bits_value >= 0x7f800000) throw InputError(std::string(what) + ": a value is infinite or NaN");
}

// 4 lanes: one SSE register on baseline x86-64 (and NEON on arm64).
using Floats = float __attribute__((vector_size(16)));
using Ints = int32_t __attribute__((vector_size(16)));

// One block of 64 values (a short last block padded with zeros, which is
// what the CUDA kernel loads there): its absmax and 32 bytes of codes.
float quantize_nf4_block(const float* x, uint8_t* out) {
  const int32_t bits = abs_max_bits(x, kNf4BlockSize);
  check_finite_bits(bits, "quantize_nf4");
  const float absmax = std::bit_cast<float>(bits);
  const float inv = 1.0f / absmax;  // inf for an all-zero block
  for (size_t j = 0; j < kNf4BlockSize; j += 4) {
    Floats v;
    std::memcpy(&v, x + j, sizeof v);
    const Floats s = v * inv;
    // The count of thresholds exceeded (a true lane is -1). NaN (0 * inf)
    // exceeds none: code 0, as the tree's last branch.
    Ints code{};
    for (float t : kNf4Thresholds) code -= s > t;
    out[j / 2] = static_cast<uint8_t>(code[0] << 4 | code[1]);
    out[j / 2 + 1] = static_cast<uint8_t>(code[2] << 4 | code[3]);
  }
  return absmax;
}

// bitsandbytes' dQuantize<0> (kQuantizeBlockwise, General8bit): a 7-step
// binary search of the 256-value map, then the nearer of the final pivot
// and its neighbour by the float midpoint; ties stay on the pivot. Written
// with selects rather than branches (the same steps), since the search's
// direction is data-dependent and mispredicts.
uint8_t dquantize8(const std::array<float, 256>& code, float x) {
  int pivot = 127, upper_pivot = 255, lower_pivot = 0;
  float lower = -1.0f, upper = 1.0f;
  float val = code[pivot];
  for (int i = 64; i > 0; i >>= 1) {
    const bool above = x > val;
    lower_pivot = above ? pivot : lower_pivot;
    lower = above ? val : lower;
    upper_pivot = above ? upper_pivot : pivot;
    upper = above ? upper : val;
    pivot += above ? i : -i;
    val = code[pivot];
  }
  upper = upper_pivot == 255 ? code[upper_pivot] : upper;
  lower = lower_pivot == 0 ? code[lower_pivot] : lower;
  const float upper_mid = (upper + val) * 0.5f;
  const float lower_mid = (lower + val) * 0.5f;
  const int above = x > upper_mid ? upper_pivot : pivot;
  const int below = x < lower_mid ? lower_pivot : pivot;
  return static_cast<uint8_t>(x > val ? above : below);
}

size_t nf4_blocks(size_t n) { return (n + kNf4BlockSize - 1) / kNf4BlockSize; }
size_t nested_blocks(size_t blocks) { return (blocks + kNf4NestedBlockSize - 1) / kNf4NestedBlockSize; }

void check_nf4_sizes(const Nf4Quantized& q) {
  const size_t blocks = nf4_blocks(q.n);
  bool ok = q.packed.size() == (q.n + 1) / 2;
  if (q.double_quant)
    ok = ok && q.absmax_code.size() == blocks && q.absmax2.size() == nested_blocks(blocks);
  else
    ok = ok && q.absmax.size() == blocks;
  if (!ok) throw InputError("dequantize_nf4: the codes or statistics do not fit " + std::to_string(q.n) + " values");
}

}  // namespace

const std::array<float, 256>& bnb_dynamic_map() {
  static const std::array<float, 256> map = [] {
    std::array<float, 256> m{};
    for (size_t i = 0; i < 256; ++i) m[i] = std::bit_cast<float>(kDynamicMapBits[i]);
    return m;
  }();
  return map;
}

Nf4Quantized quantize_nf4(const float* data, size_t n, bool double_quant) {
  Nf4Quantized q;
  q.n = n;
  q.double_quant = double_quant;
  const size_t blocks = nf4_blocks(n);
  std::vector<float> absmax(blocks);
  q.packed.resize((n + 1) / 2);
  auto* out = reinterpret_cast<uint8_t*>(q.packed.data());
  const size_t full = n / kNf4BlockSize;
  for (size_t b = 0; b < full; ++b)
    absmax[b] = quantize_nf4_block(data + b * kNf4BlockSize, out + b * kNf4BlockSize / 2);
  if (full < blocks) {
    const size_t valid = n - full * kNf4BlockSize;
    float x[kNf4BlockSize] = {};
    std::memcpy(x, data + full * kNf4BlockSize, valid * sizeof(float));
    uint8_t codes[kNf4BlockSize / 2];
    absmax[full] = quantize_nf4_block(x, codes);
    std::memcpy(out + full * kNf4BlockSize / 2, codes, (valid + 1) / 2);
  }
  if (!double_quant) {
    q.absmax = std::move(absmax);
    return q;
  }
  // The offset: bitsandbytes takes torch's float32 mean, whose last bit
  // depends on the device's reduction order; this one is accumulated in
  // double, in order, and rounded to float once.
  double sum = 0;
  for (float a : absmax) sum += a;
  q.offset = blocks ? static_cast<float>(sum / static_cast<double>(blocks)) : 0.0f;
  const auto& map = bnb_dynamic_map();
  q.absmax_code.resize(blocks);
  q.absmax2.resize(nested_blocks(blocks));
  std::vector<float> d(blocks);
  for (size_t b = 0; b < blocks; ++b) d[b] = absmax[b] - q.offset;
  for (size_t nb = 0; nb < q.absmax2.size(); ++nb) {
    const size_t begin = nb * kNf4NestedBlockSize;
    const size_t count = std::min(kNf4NestedBlockSize, blocks - begin);
    const float a2 = std::bit_cast<float>(abs_max_bits(d.data() + begin, count));
    q.absmax2[nb] = a2;
    const float inv = 1.0f / a2;
    for (size_t j = 0; j < count; ++j) q.absmax_code[begin + j] = dquantize8(map, d[begin + j] * inv);
  }
  return q;
}

std::vector<float> nf4_block_absmax(const Nf4Quantized& q) {
  check_nf4_sizes(q);
  if (!q.double_quant) return q.absmax;
  const auto& map = bnb_dynamic_map();
  std::vector<float> absmax(q.absmax_code.size());
  for (size_t b = 0; b < absmax.size(); ++b) {
    const float scaled = map[q.absmax_code[b]] * q.absmax2[b / kNf4NestedBlockSize];
    absmax[b] = scaled + q.offset;
  }
  return absmax;
}

std::vector<float> dequantize_nf4(const Nf4Quantized& q) {
  const std::vector<float> absmax = nf4_block_absmax(q);
  std::vector<float> y(q.n);
  const auto* in = reinterpret_cast<const uint8_t*>(q.packed.data());
  for (size_t i = 0; i < q.n; ++i) {
    const uint8_t byte = in[i / 2];
    const int code = i % 2 == 0 ? byte >> 4 : byte & 0x0f;
    y[i] = kNf4Code[code] * absmax[i / kNf4BlockSize];
  }
  return y;
}

Int8RowQuantized quantize_int8_rowwise(const float* data, size_t rows, size_t cols) {
  Int8RowQuantized q;
  q.rows = rows;
  q.cols = cols;
  q.q.resize(rows * cols);
  q.row_absmax.resize(rows);
  for (size_t r = 0; r < rows; ++r) {
    const float* x = data + r * cols;
    const int32_t bits = abs_max_bits(x, cols);
    check_finite_bits(bits, "quantize_int8_rowwise");
    const float absmax = std::bit_cast<float>(bits);
    q.row_absmax[r] = absmax;
    int8_t* out = q.q.data() + r * cols;
    if (bits == 0) {  // 0 * inf is NaN there, which bitsandbytes' casts make 0
      std::fill(out, out + cols, int8_t{0});
      continue;
    }
    // torch's 127.0 / t is t.reciprocal() * 127: two roundings.
    const float scale = (1.0f / absmax) * 127.0f;
    if (std::isinf(scale))
      throw InputError("quantize_int8_rowwise: row " + std::to_string(r) + "'s absmax " + std::to_string(absmax) +
                       " is too small: 127 / absmax overflows");
    // |x * scale| <= 127.00002, where adding 1.5 * 2^23 rounds half to even
    // exactly as torch.round does.
    for (size_t j = 0; j < cols; ++j) {
      const float v = x[j] * scale;
      const float rounded = (v + 12582912.0f) - 12582912.0f;
      out[j] = static_cast<int8_t>(static_cast<int32_t>(rounded));
    }
  }
  return q;
}

std::vector<float> dequantize_int8_rowwise(const Int8RowQuantized& q) {
  if (q.q.size() != q.rows * q.cols || q.row_absmax.size() != q.rows)
    throw InputError("dequantize_int8_rowwise: the codes or statistics do not fit " + std::to_string(q.rows) + " x " +
                     std::to_string(q.cols) + " values");
  // int8_vectorwise_dequant: A * stats * 7.874015718698502e-3, in float32.
  constexpr float kInv127 = static_cast<float>(7.874015718698502e-3);
  std::vector<float> y(q.q.size());
  for (size_t r = 0; r < q.rows; ++r)
    for (size_t j = 0; j < q.cols; ++j) {
      const float scaled = static_cast<float>(q.q[r * q.cols + j]) * q.row_absmax[r];
      y[r * q.cols + j] = scaled * kInv127;
    }
  return y;
}

size_t nf4_bytes(size_t n, bool double_quant) {
  const size_t blocks = nf4_blocks(n);
  const size_t codes = (n + 1) / 2;
  if (!double_quant) return codes + 4 * blocks;
  return codes + blocks + 4 * nested_blocks(blocks) + (blocks ? 4 : 0);
}

size_t int8_rowwise_bytes(size_t rows, size_t cols) { return rows * cols + 4 * rows; }

double nf4_bits_per_weight(bool double_quant) {
  const double block = static_cast<double>(kNf4BlockSize);
  if (!double_quant) return 4.0 + 32.0 / block;
  return 4.0 + 8.0 / block + 32.0 / (block * static_cast<double>(kNf4NestedBlockSize));
}

}  // namespace gpumem::weights
