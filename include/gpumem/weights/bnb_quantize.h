#pragma once
// bitsandbytes' weight formats, as QLoRA and LLM.int8() store them: NF4 in
// blocks of 64 (bitsandbytes.functional.quantize_4bit(quant_type="nf4",
// blocksize=64)), with and without double quantization of its scales
// (compress_statistics=True), and int8 with one absmax per row
// (int8_vectorwise_quant, LLM.int8()'s vector-wise quantization).
//
// The arithmetic is bitsandbytes' own, in float32, each operation rounded
// once (compiled with -ffp-contract=off), so the codes and statistics are
// the ones it computes; tests/data/weights/bnb_vectors.txt checks them byte
// for byte (tools/bnb_vectors.py says how those vectors were made: from
// bitsandbytes' source, not from a run of it).
//
// NF4, per block of 64 values (the last block may be shorter):
//   absmax = max |x|; inv = 1 / absmax; code = the NF4 value nearest
//   x * inv by bitsandbytes' decision tree (dQuantizeNF4: 15 thresholds at
//   the midpoints of the table, a value exactly on one takes the lower
//   code; in an all-zero block 0 * inf is NaN, which takes code 0). Two
//   codes a byte, the earlier value in the high nibble; an odd count pads
//   the low nibble of the last byte with the code of 0 * inv.
//   Dequantized: kNf4Code[code] * absmax.
// Double quantization: offset = mean of the absmaxes; the differences
//   absmax - offset are quantized to 8 bits in blocks of 256 with
//   bitsandbytes' signed dynamic map (create_dynamic_map) and an fp32
//   absmax per 256 (the CUDA kernel's dQuantize: binary search, then the
//   nearer neighbour by float midpoints; the search ends on an even index,
//   so a value on a midpoint takes the even code). The offset is the
//   float64 mean rounded to float32 (torch's float32 mean can differ in its
//   last bit). Dequantized: each block's absmax is map[code8] * absmax2 +
//   offset, then as above.
// int8 per row: absmax = max |x| of the row; q = round-half-even(x *
//   ((1 / absmax) * 127)); a row of zeros gives q = 0 and absmax 0.
//   Dequantized: q * absmax * (1/127 as float), left to right.
// Where bitsandbytes' float32 dequantization overflows (absmax near
// FLT_MAX), so does this: the values come back infinite.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gpumem::weights {

inline constexpr size_t kNf4BlockSize = 64;         // values per absmax
inline constexpr size_t kNf4NestedBlockSize = 256;  // absmaxes per nested absmax

// The 16 NF4 values (QLoRA paper, Dettmers et al. 2023, appendix E;
// bitsandbytes' dDequantizeNF4), code 0 to 15.
extern const std::array<float, 16> kNf4Code;
// dQuantizeNF4's thresholds, increasing: code = how many of them x exceeds.
extern const std::array<float, 15> kNf4Thresholds;
// bitsandbytes' create_dynamic_map(signed=True, max_exponent_bits=7,
// total_bits=8) as float32 torch 2 computes it: 256 values, sorted, from
// -0.99296875 to 1.
const std::array<float, 256>& bnb_dynamic_map();

// NF4 codes of n values and their statistics.
struct Nf4Quantized {
  size_t n = 0;                      // values
  std::string packed;                // (n + 1) / 2 bytes, two codes a byte
  bool double_quant = false;         // which statistics below are set
  std::vector<float> absmax;         // without double quantization: one per block
  std::vector<uint8_t> absmax_code;  // with: one 8-bit code per block,
  std::vector<float> absmax2;        // one fp32 absmax per 256 blocks,
  float offset = 0;                  // and the mean subtracted first
};

// n values as NF4. InputError when a value is infinite or NaN (bitsandbytes'
// codes for those are artefacts of its comparisons, not a format).
Nf4Quantized quantize_nf4(const float* data, size_t n, bool double_quant);
// Each block's absmax as dequantization uses it (for double quantization,
// recovered from the 8-bit codes). InputError when the statistics' sizes do
// not fit q.n.
std::vector<float> nf4_block_absmax(const Nf4Quantized& q);
// Back to q.n floats. InputError when the sizes of q's parts do not fit q.n.
std::vector<float> dequantize_nf4(const Nf4Quantized& q);

// int8 codes of a rows x cols row-major matrix and their row absmaxes.
struct Int8RowQuantized {
  size_t rows = 0, cols = 0;
  std::vector<int8_t> q;          // rows * cols
  std::vector<float> row_absmax;  // rows (bitsandbytes' SCB / row_stats)
};

// InputError when a value is infinite or NaN, or a row's absmax is so small
// (below about 3.7e-37, not zero) that 127 / absmax overflows: bitsandbytes'
// codes there come from an undefined float-to-int conversion.
Int8RowQuantized quantize_int8_rowwise(const float* data, size_t rows, size_t cols);
// Back to rows * cols floats. InputError when the sizes do not fit.
std::vector<float> dequantize_int8_rowwise(const Int8RowQuantized& q);

// Bytes each format takes, codes and statistics together, as bitsandbytes
// stores them (fp32 statistics): NF4 (n + 1) / 2 + 4 per block; with double
// quantization (n + 1) / 2 + 1 per block + 4 per 256 blocks + 4 (the
// offset); int8 rows * cols + 4 per row.
size_t nf4_bytes(size_t n, bool double_quant);
size_t int8_rowwise_bytes(size_t rows, size_t cols);
// Bits per weight as n grows (whole blocks): 4 + 32/64 = 4.5 without double
// quantization, 4 + 8/64 + 32/(64*256) = 4.127 with (QLoRA paper, section 3).
double nf4_bits_per_weight(bool double_quant);

}  // namespace gpumem::weights
