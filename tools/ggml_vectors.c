/* Known-answer vectors for gpumem's quantization codecs, computed by ggml
 * itself: this tool dlopens llama.cpp's libggml-base.so and runs its
 * reference functions on fixed, deterministic inputs, so the fixture says
 * what ggml does, not what we think it does.
 *
 * Library: npm package @node-llama-cpp/linux-x64@3.21.1 (llama.cpp release
 * tag recorded in its _nlcBuildMetadata.json), file
 * bins/linux-x64/libggml-base.so, sha256
 * 1eba024559799447e34687e12b6794e79ad3768a1b3d2cbca9fadc829f0f85c7.
 *
 * Made with (the package is also installed under /work/node/node_modules):
 *   mkdir -p /tmp/npmq && cd /tmp/npmq && npm pack @node-llama-cpp/linux-x64@3.21.1
 *   tar xzf node-llama-cpp-linux-x64-3.21.1.tgz && cd -
 *   LIB=/tmp/npmq/package/bins/linux-x64/libggml-base.so
 *   cc -O2 -o /tmp/ggml_vectors tools/ggml_vectors.c -ldl -lm
 *   /tmp/ggml_vectors $LIB > tests/data/weights/ggml_vectors.txt
 *   /tmp/ggml_vectors $LIB kquants > tests/data/weights/ggml_kquant_vectors.txt
 *
 * Output: one line per 32-value block, "<kind> <hex bytes>", little-endian:
 *   input  32 float32, the quantizers' input block;
 *   q8_0   ggml's block_q8_0 of the preceding input (fp16 d, 32 int8);
 *   q4_0   ggml's block_q4_0 of the preceding input (fp16 d, 16 bytes of nibbles);
 *   q5_0   ggml's block_q5_0 of the preceding input (fp16 d, 4 bytes of fifth
 *          bits, 16 bytes of nibbles);
 *   q5_1   ggml's block_q5_1 of the preceding input (fp16 d, fp16 m, 4 bytes
 *          of fifth bits, 16 bytes of nibbles);
 *   dq5_0, dq5_1  dequantize_row_q5_0/q5_1 of those blocks (32 float32);
 *   conv   32 float32, the conversions' input (quant inputs plus special values);
 *   fp16   ggml_fp32_to_fp16 of the preceding conv block;
 *   bf16   ggml_fp32_to_bf16 of the preceding conv block.
 * With "kquants", one line per 256-value super-block instead (its own LCG
 * seed), from quantize_row_q4_K_ref, quantize_row_q6_K_ref and
 * quantize_row_q5_K_ref:
 *   input  256 float32, the quantizers' input;
 *   q4_K   ggml's block_q4_K of the preceding input (144 bytes: fp16 d,
 *          fp16 dmin, 12 bytes of 6-bit scales and mins, 128 of nibbles);
 *   q6_K   ggml's block_q6_K of the preceding input (210 bytes: 128 low
 *          nibbles, 64 bytes of high 2 bits, 16 int8 scales, fp16 d);
 *   dq4_K  dequantize_row_q4_K of that q4_K block (256 float32);
 *   dq6_K  dequantize_row_q6_K of that q6_K block (256 float32);
 *   q5_K   ggml's block_q5_K of the preceding input (176 bytes: fp16 d,
 *          fp16 dmin, 12 bytes of 6-bit scales and mins, 32 bytes of fifth
 *          bits, 128 of nibbles);
 *   dq5_K  dequantize_row_q5_K of that q5_K block (256 float32).
 * The q5 lines (and the last 32-value input block, with its lines) were
 * added later: the other lines are those of the files made before them,
 * byte for byte. tests/cli/test_quantize_cli.cpp and tools/make_tiny_llama.py
 * take their values from the kquants inputs, so those stay as they are.
 * Lines starting with '#' are comments. */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QK 32

/* ggml-common.h's layouts: an fp16 scale, then the quants. */
typedef struct {
  uint16_t d;
  int8_t qs[QK];
} block_q8_0;
typedef struct {
  uint16_t d;
  uint8_t qs[QK / 2];
} block_q4_0;
typedef struct {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[QK / 2];
} block_q5_0;
typedef struct {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[QK / 2];
} block_q5_1;
_Static_assert(sizeof(block_q5_0) == 22 && sizeof(block_q5_1) == 24, "ggml-common.h's block sizes");

/* ggml-quants.h and ggml.h (ggml_bf16_t is a struct of one uint16_t, which
 * the x86-64 ABI returns in a register exactly as a uint16_t). */
typedef void (*quantize_q8_0_fn)(const float*, block_q8_0*, int64_t);
typedef void (*quantize_q4_0_fn)(const float*, block_q4_0*, int64_t);
typedef void (*quantize_block_fn)(const float*, void*, int64_t);
typedef void (*dequantize_block_fn)(const void*, float*, int64_t);
typedef uint16_t (*to_half_fn)(float);
/* The K-quant blocks are passed as opaque bytes of ggml-common.h's sizes. */
typedef void (*quantize_k_fn)(const float*, void*, int64_t);
/* dequantize_row_q4_K(const block_q4_K * x, float * y, int64_t k), likewise q6_K. */
typedef void (*dequantize_k_fn)(const void*, float*, int64_t);

static void* must(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  if (!p) {
    fprintf(stderr, "missing symbol %s\n", name);
    exit(1);
  }
  return p;
}

static void hex_line(const char* kind, const void* bytes, size_t n) {
  const unsigned char* b = (const unsigned char*)bytes;
  printf("%s ", kind);
  for (size_t i = 0; i < n; ++i) printf("%02x", b[i]);
  printf("\n");
}

static uint32_t lcg_state = 12345u;
/* A uniform value in [-1, 1): a fixed LCG so the inputs never change. */
static float lcg(void) {
  lcg_state = lcg_state * 1664525u + 1013904223u;
  return (float)(lcg_state >> 8) / 8388608.0f - 1.0f;
}

static float from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

#define MAX_BLOCKS 64
static float blocks[MAX_BLOCKS][QK];
static int n_blocks = 0;

static float* next_block(void) { return blocks[n_blocks++]; }

static void make_quant_inputs(void) {
  /* Random blocks over many scales, where real weights live and beyond. */
  const float scales[] = {1e-4f, 1e-3f, 0.01f, 0.05f, 0.1f, 0.5f, 1.0f, 2.0f, 10.0f, 100.0f, 1e3f, 3e4f};
  for (size_t s = 0; s < sizeof scales / sizeof scales[0]; ++s)
    for (int r = 0; r < 2; ++r) {
      float* x = next_block();
      for (int j = 0; j < QK; ++j) x[j] = lcg() * scales[s];
    }
  float* x = next_block(); /* all zeros: d = 0, every quant 0 (Q4_0: 8) */
  memset(x, 0, sizeof(float) * QK);
  x = next_block(); /* one huge value: the others all round to 0 */
  for (int j = 0; j < QK; ++j) x[j] = lcg() * 0.01f;
  x[5] = 1e4f;
  x = next_block(); /* negative only */
  for (int j = 0; j < QK; ++j) x[j] = -fabsf(lcg()) - 0.001f;
  x = next_block(); /* Q8_0 ties: amax 127 gives d = 1, so x/d = k + 0.5 */
  x[0] = 127.0f;
  for (int j = 1; j < QK; ++j) x[j] = (float)(j - 16) + 0.5f;
  x = next_block(); /* Q4_0 ties: max -8 gives d = 1, x/d + 8.5 exact halves */
  x[0] = -8.0f;
  for (int j = 1; j < QK; ++j) x[j] = (float)(j - 16) * 0.5f;
  x = next_block(); /* Q4_0: largest magnitude positive, so d < 0 */
  for (int j = 0; j < QK; ++j) x[j] = lcg();
  x[17] = 3.0f;
  x = next_block(); /* equal magnitudes, opposite signs: the first one wins */
  for (int j = 0; j < QK; ++j) x[j] = lcg();
  x[3] = -5.0f;
  x[10] = 5.0f;
  x = next_block(); /* float subnormals next to a normal value: they quantize to 0 */
  for (int j = 0; j < QK; ++j) x[j] = from_bits(0x00000001u + (uint32_t)j * 0x1234u);
  x[31] = 1.0f;
  x = next_block(); /* tiny but normal: the fp16 scale underflows to 0 */
  for (int j = 0; j < QK; ++j) x[j] = lcg() * 1e-36f;
  x[0] = 1e-36f;
  x = next_block(); /* beyond fp16: d = amax/127 overflows fp16 to inf */
  for (int j = 0; j < QK; ++j) x[j] = lcg() * 1e7f;
  /* Added with the q5 lines, last and without the LCG so that the lines
   * before stay as they were. Only float subnormals: 1/d overflows to
   * infinity, so x/d is infinite or NaN and the quants are what C's
   * conversion of those gives on x86-64. */
  x = next_block();
  for (int j = 0; j < QK; ++j)
    x[j] = from_bits((j % 2 ? 0x80000000u : 0u) | ((uint32_t)j * 0x3ffffu + 12345u) % 0x800000u);
}

#define QK_K 256
#define Q4_K_BYTES 144
#define Q6_K_BYTES 210
#define Q5_K_BYTES 176
static float super_blocks[MAX_BLOCKS][QK_K];
static int n_super = 0;

static float* next_super(void) { return super_blocks[n_super++]; }

static void make_kquant_inputs(void) {
  lcg_state = 54321u;
  /* Random super-blocks over many scales. */
  const float scales[] = {1e-4f, 1e-3f, 0.01f, 0.05f, 0.1f, 1.0f, 10.0f, 1e3f};
  for (size_t s = 0; s < sizeof scales / sizeof scales[0]; ++s)
    for (int r = 0; r < 2; ++r) {
      float* x = next_super();
      for (int j = 0; j < QK_K; ++j) x[j] = lcg() * scales[s];
    }
  float* x = next_super(); /* weight-like: a narrow bell from a sum of uniforms */
  for (int j = 0; j < QK_K; ++j) x[j] = (lcg() + lcg() + lcg()) * 0.02f;
  x = next_super(); /* sub-blocks of very different scales */
  for (int j = 0; j < QK_K; ++j) x[j] = lcg() * powf(10.0f, (float)(j / 32) - 4.0f);
  x = next_super(); /* all zeros */
  memset(x, 0, sizeof(float) * QK_K);
  x = next_super(); /* one outlier: the other sub-blocks' scales round to 0 */
  for (int j = 0; j < QK_K; ++j) x[j] = lcg() * 0.01f;
  x[77] = 1e4f;
  x = next_super(); /* negative only */
  for (int j = 0; j < QK_K; ++j) x[j] = -fabsf(lcg()) - 0.001f;
  x = next_super(); /* positive only */
  for (int j = 0; j < QK_K; ++j) x[j] = fabsf(lcg()) + 0.001f;
  x = next_super(); /* tiny values: below GROUP_MAX_EPS (1e-15) */
  for (int j = 0; j < QK_K; ++j) x[j] = lcg() * 1e-16f;
  x = next_super(); /* tiny but normal floats: squares underflow */
  for (int j = 0; j < QK_K; ++j) x[j] = lcg() * 1e-30f;
  x = next_super(); /* one zero sub-block among random ones */
  for (int j = 0; j < QK_K; ++j) x[j] = j >= 64 && j < 96 ? 0.0f : lcg();
  x = next_super(); /* constant sub-blocks: max == min */
  for (int j = 0; j < QK_K; ++j) x[j] = (float)(j / 32) * 0.25f - 1.0f;
  x = next_super(); /* a grid of integers: ties in the rounding */
  for (int j = 0; j < QK_K; ++j) x[j] = (float)((j * 7) % 33 - 16);
  x = next_super(); /* halves: ties of x/d */
  for (int j = 0; j < QK_K; ++j) x[j] = (float)((j * 5) % 64 - 32) * 0.5f;
  x = next_super(); /* large values */
  for (int j = 0; j < QK_K; ++j) x[j] = lcg() * 3e4f;
}

/* Values that test the fp16/bf16 roundings and special cases. */
static void make_special(float out[2 * QK]) {
  const uint32_t bits[] = {
      0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, /* +-0, +-inf */
      0x7fc00000u, 0xffc00000u, 0x7fc12345u, 0x7f800001u, /* NaNs: quiet, payload, signalling */
      0xff812345u, 0x00000001u, 0x807fffffu, 0x00400000u, /* NaN; float subnormals */
      0x3f808000u, 0x3f818000u, 0x3f807fffu, 0x3f808001u, /* bf16 ties and near-ties */
      0xbf808000u, 0xbf818000u, 0x7f7f8000u, 0x7f7fffffu, /* negative ties; rounds to inf */
      0x3f801000u, 0x3f803000u, 0x3f800fffu, 0x3f801001u, /* fp16 ties at 1 */
      0x477fe000u, 0x477fefffu, 0x477ff000u, 0x47800000u, /* 65504, just below/at the overflow tie, 65536 */
      0x33800000u, 0x33000000u, 0x33000001u, 0x33c00000u, /* fp16 smallest subnormal, half of it, tie +, 1.5x */
      0x387fc000u, 0x38800000u, 0x387fe000u, 0x38002000u, /* fp16 subnormal/normal border */
      0xc77ff000u, 0x49742400u, 0xc9742400u, 0x5f000000u, /* -overflow tie, +-1e6, 2^63 */
  };
  const size_t n = sizeof bits / sizeof bits[0];
  for (size_t i = 0; i < 2 * QK; ++i) out[i] = i < n ? from_bits(bits[i]) : lcg() * 70000.0f;
}

static int emit_kquants(void* lib) {
  quantize_k_fn q4k = (quantize_k_fn)must(lib, "quantize_row_q4_K_ref");
  quantize_k_fn q6k = (quantize_k_fn)must(lib, "quantize_row_q6_K_ref");
  dequantize_k_fn dq4k = (dequantize_k_fn)must(lib, "dequantize_row_q4_K");
  dequantize_k_fn dq6k = (dequantize_k_fn)must(lib, "dequantize_row_q6_K");
  quantize_k_fn q5k = (quantize_k_fn)must(lib, "quantize_row_q5_K_ref");
  dequantize_k_fn dq5k = (dequantize_k_fn)must(lib, "dequantize_row_q5_K");
  make_kquant_inputs();
  printf("# made by tools/ggml_vectors.c (kquants) from libggml-base.so of @node-llama-cpp/linux-x64@3.21.1\n");
  for (int i = 0; i < n_super; ++i) {
    unsigned char b4[Q4_K_BYTES], b6[Q6_K_BYTES];
    float d4[QK_K], d6[QK_K];
    q4k(super_blocks[i], b4, QK_K);
    q6k(super_blocks[i], b6, QK_K);
    dq4k(b4, d4, QK_K);
    dq6k(b6, d6, QK_K);
    hex_line("input", super_blocks[i], sizeof(float) * QK_K);
    hex_line("q4_K", b4, sizeof b4);
    hex_line("q6_K", b6, sizeof b6);
    hex_line("dq4_K", d4, sizeof d4);
    hex_line("dq6_K", d6, sizeof d6);
    unsigned char b5[Q5_K_BYTES];
    float d5[QK_K];
    q5k(super_blocks[i], b5, QK_K);
    dq5k(b5, d5, QK_K);
    hex_line("q5_K", b5, sizeof b5);
    hex_line("dq5_K", d5, sizeof d5);
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 2 && !(argc == 3 && strcmp(argv[2], "kquants") == 0)) {
    fprintf(stderr, "usage: %s path/to/libggml-base.so [kquants]\n", argv[0]);
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  if (argc == 3) return emit_kquants(lib);
  quantize_q8_0_fn q8 = (quantize_q8_0_fn)must(lib, "quantize_row_q8_0_ref");
  quantize_q4_0_fn q4 = (quantize_q4_0_fn)must(lib, "quantize_row_q4_0_ref");
  quantize_block_fn q50 = (quantize_block_fn)must(lib, "quantize_row_q5_0_ref");
  quantize_block_fn q51 = (quantize_block_fn)must(lib, "quantize_row_q5_1_ref");
  dequantize_block_fn dq50 = (dequantize_block_fn)must(lib, "dequantize_row_q5_0");
  dequantize_block_fn dq51 = (dequantize_block_fn)must(lib, "dequantize_row_q5_1");
  to_half_fn fp16 = (to_half_fn)must(lib, "ggml_fp32_to_fp16");
  to_half_fn bf16 = (to_half_fn)must(lib, "ggml_fp32_to_bf16");

  make_quant_inputs();
  printf("# made by tools/ggml_vectors.c from libggml-base.so of @node-llama-cpp/linux-x64@3.21.1\n");
  for (int i = 0; i < n_blocks; ++i) {
    block_q8_0 b8;
    block_q4_0 b4;
    q8(blocks[i], &b8, QK);
    q4(blocks[i], &b4, QK);
    hex_line("input", blocks[i], sizeof(float) * QK);
    hex_line("q8_0", &b8, sizeof b8);
    hex_line("q4_0", &b4, sizeof b4);
    block_q5_0 b50;
    block_q5_1 b51;
    float d50[QK], d51[QK];
    q50(blocks[i], &b50, QK);
    q51(blocks[i], &b51, QK);
    dq50(&b50, d50, QK);
    dq51(&b51, d51, QK);
    hex_line("q5_0", &b50, sizeof b50);
    hex_line("q5_1", &b51, sizeof b51);
    hex_line("dq5_0", d50, sizeof d50);
    hex_line("dq5_1", d51, sizeof d51);
  }
  float special[2 * QK];
  make_special(special);
  for (int i = 0; i < n_blocks + 2; ++i) {
    const float* x = i < n_blocks ? blocks[i] : special + (i - n_blocks) * QK;
    uint16_t h[QK], b[QK];
    for (int j = 0; j < QK; ++j) {
      h[j] = fp16(x[j]);
      b[j] = bf16(x[j]);
    }
    hex_line("conv", x, sizeof(float) * QK);
    hex_line("fp16", h, sizeof h);
    hex_line("bf16", b, sizeof b);
  }
  return 0;
}
