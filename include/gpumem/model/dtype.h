#pragma once
// Element types of model tensors, numbered as ONNX's TensorProto.DataType so
// values read from a file map one to one.
#include <cstdint>
#include <optional>
#include <string_view>

namespace gpumem {

enum class DType : int32_t {
  Undefined = 0,
  Float = 1,
  UInt8 = 2,
  Int8 = 3,
  UInt16 = 4,
  Int16 = 5,
  Int32 = 6,
  Int64 = 7,
  String = 8,
  Bool = 9,
  Float16 = 10,
  Double = 11,
  UInt32 = 12,
  UInt64 = 13,
  Complex64 = 14,
  Complex128 = 15,
  BFloat16 = 16,
  Float8E4M3FN = 17,
  Float8E4M3FNUZ = 18,
  Float8E5M2 = 19,
  Float8E5M2FNUZ = 20,
  UInt4 = 21,
  Int4 = 22,
};

// Lower-case names as users write them: "float32", "fp16", "bf16", "int4"...
std::string_view dtype_name(DType t);

// Parses the names --dtype accepts: fp32|float32|float, fp16|float16,
// bf16|bfloat16, int8, uint8, fp64|float64|double. nullopt when unknown.
std::optional<DType> parse_dtype(std::string_view name);

// Any value of the enum's range; the file may hold anything else.
bool is_known_dtype(int32_t raw);

// Storage bits of one element; 0 where the size is not fixed (string) or the
// type is undefined.
int dtype_bits(DType t);

bool is_floating(DType t);

// Bytes of `elements` values, packed (int4: two per byte, rounded up).
// nullopt when the type has no fixed size or the result overflows.
std::optional<uint64_t> storage_bytes(DType t, uint64_t elements);

}  // namespace gpumem
