// ggml's tensor types: the id a GGUF file stores, the name ggml gives it,
// and its block (block_size elements in type_size bytes), as ggml's
// ggml_type enum and type traits define them. Retired ids (Q4_2, Q4_3 and
// the repacked Q4_0_x_y / IQ4_NL_x_y, which GGUF files may no longer hold)
// are unknown on purpose: llama.cpp refuses them too.
#include <algorithm>
#include <array>
#include <cctype>
#include <stdexcept>
#include <string>

#include "gpumem/weights/gguf.h"

namespace gpumem::weights {
namespace {

constexpr std::array<GgmlType, 34> kTypes{{
    {0, "F32", 1, 4},         {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},  // fp16 scale + 32 nibbles
    {3, "Q4_1", 32, 20},                                                      // fp16 scale and min + 32 nibbles
    {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},      {8, "Q8_0", 32, 34},  // fp16 scale + 32 int8
    {9, "Q8_1", 32, 36},      {10, "Q2_K", 256, 84},                          // K-quants: super-blocks of 256
    {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},  {14, "Q6_K", 256, 210},
    {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66}, {17, "IQ2_XS", 256, 74}, {18, "IQ3_XXS", 256, 98},
    {19, "IQ1_S", 256, 50},   {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110}, {22, "IQ2_S", 256, 82},
    {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},         {25, "I16", 1, 2},       {26, "I32", 1, 4},
    {27, "I64", 1, 8},        {28, "F64", 1, 8},        {29, "IQ1_M", 256, 56},  {30, "BF16", 1, 2},
    {34, "TQ1_0", 256, 54},                           // ternary
    {35, "TQ2_0", 256, 66},   {39, "MXFP4", 32, 17},  // E8M0 scale + 32 fp4
    {40, "NVFP4", 64, 36},                            // four E4M3 scales + 64 fp4
    {41, "Q1_0", 128, 18},
}};

bool same_name(std::string_view a, std::string_view b) {
  return std::ranges::equal(a, b, [](char x, char y) {
    return std::toupper(static_cast<unsigned char>(x)) == std::toupper(static_cast<unsigned char>(y));
  });
}

}  // namespace

const GgmlType* ggml_type(uint32_t id) {
  const auto it = std::ranges::find(kTypes, id, &GgmlType::id);
  return it == kTypes.end() ? nullptr : &*it;
}

const GgmlType* ggml_type_named(std::string_view name) {
  const auto it = std::ranges::find_if(kTypes, [&](const GgmlType& t) { return same_name(t.name, name); });
  return it == kTypes.end() ? nullptr : &*it;
}

uint64_t ggml_tensor_bytes(uint32_t type, const std::vector<uint64_t>& ne) {
  const GgmlType* t = ggml_type(type);
  if (!t) throw std::invalid_argument("unknown ggml type " + std::to_string(type));
  if (ne.empty()) throw std::invalid_argument("a tensor needs at least one dimension");
  uint64_t elements = 1;
  for (const uint64_t n : ne) {
    if (n == 0) throw std::invalid_argument("a dimension of size 0");
    // ggml counts elements in int64_t.
    if (elements > static_cast<uint64_t>(INT64_MAX) / n) throw std::invalid_argument("the element count overflows");
    elements *= n;
  }
  if (ne[0] % t->block_size != 0)
    throw std::invalid_argument("ne[0] = " + std::to_string(ne[0]) + " is not a multiple of " + std::string(t->name) +
                                "'s block of " + std::to_string(t->block_size));
  const uint64_t blocks = elements / t->block_size;
  if (blocks > UINT64_MAX / t->type_size) throw std::invalid_argument("the byte count overflows");
  return blocks * t->type_size;
}

}  // namespace gpumem::weights
