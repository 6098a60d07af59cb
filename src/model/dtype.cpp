#include "gpumem/model/dtype.h"

#include <limits>

namespace gpumem {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::Float: return "float32";
    case DType::UInt8: return "uint8";
    case DType::Int8: return "int8";
    case DType::UInt16: return "uint16";
    case DType::Int16: return "int16";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::String: return "string";
    case DType::Bool: return "bool";
    case DType::Float16: return "float16";
    case DType::Double: return "float64";
    case DType::UInt32: return "uint32";
    case DType::UInt64: return "uint64";
    case DType::Complex64: return "complex64";
    case DType::Complex128: return "complex128";
    case DType::BFloat16: return "bfloat16";
    case DType::Float8E4M3FN: return "float8e4m3fn";
    case DType::Float8E4M3FNUZ: return "float8e4m3fnuz";
    case DType::Float8E5M2: return "float8e5m2";
    case DType::Float8E5M2FNUZ: return "float8e5m2fnuz";
    case DType::UInt4: return "uint4";
    case DType::Int4: return "int4";
    case DType::Undefined: break;
  }
  return "undefined";
}

std::optional<DType> parse_dtype(std::string_view name) {
  // Both families of names: PyTorch's (fp16, float16) and ggml's (f16), so
  // that every command that takes a dtype takes the same words.
  if (name == "fp32" || name == "f32" || name == "float32" || name == "float") return DType::Float;
  if (name == "fp16" || name == "f16" || name == "float16" || name == "half") return DType::Float16;
  if (name == "bf16" || name == "bfloat16") return DType::BFloat16;
  if (name == "fp64" || name == "f64" || name == "float64" || name == "double") return DType::Double;
  if (name == "int8") return DType::Int8;
  if (name == "uint8") return DType::UInt8;
  if (name == "fp8" || name == "float8e4m3fn") return DType::Float8E4M3FN;
  if (name == "int4") return DType::Int4;
  return std::nullopt;
}

bool is_known_dtype(int32_t raw) { return raw >= 0 && raw <= static_cast<int32_t>(DType::Int4); }

int dtype_bits(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::UInt8:
    case DType::Int8:
    case DType::Float8E4M3FN:
    case DType::Float8E4M3FNUZ:
    case DType::Float8E5M2:
    case DType::Float8E5M2FNUZ: return 8;
    case DType::UInt16:
    case DType::Int16:
    case DType::Float16:
    case DType::BFloat16: return 16;
    case DType::Float:
    case DType::Int32:
    case DType::UInt32: return 32;
    case DType::Int64:
    case DType::UInt64:
    case DType::Double:
    case DType::Complex64: return 64;
    case DType::Complex128: return 128;
    case DType::UInt4:
    case DType::Int4: return 4;
    case DType::String:
    case DType::Undefined: break;
  }
  return 0;
}

bool is_floating(DType t) {
  switch (t) {
    case DType::Float:
    case DType::Float16:
    case DType::BFloat16:
    case DType::Double:
    case DType::Float8E4M3FN:
    case DType::Float8E4M3FNUZ:
    case DType::Float8E5M2:
    case DType::Float8E5M2FNUZ: return true;
    default: return false;
  }
}

std::optional<uint64_t> storage_bytes(DType t, uint64_t elements) {
  const int bits = dtype_bits(t);
  if (bits == 0) return std::nullopt;
  if (bits < 8) return elements / 2 + elements % 2;  // packed nibbles
  const uint64_t per = static_cast<uint64_t>(bits) / 8;
  if (elements > std::numeric_limits<uint64_t>::max() / per) return std::nullopt;
  return elements * per;
}

}  // namespace gpumem
