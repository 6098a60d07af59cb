#include "model/tensor_value.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace gpumem::detail {
namespace {

// IEEE half and bfloat16 to float, for the rare shape constant stored so.
double half_to_double(uint16_t h) {
  const int sign = (h >> 15) & 1;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  double v;
  if (exponent == 0) {
    v = std::ldexp(mantissa, -24);
  } else if (exponent == 31) {
    v = mantissa ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else {
    v = std::ldexp(mantissa + 1024, exponent - 25);
  }
  return sign ? -v : v;
}

double bfloat16_to_double(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// float32 of a folded value: arithmetic in double may leave float's range,
// where a plain conversion is undefined; IEEE rounding gives infinity.
float to_float(double x) {
  if (x > static_cast<double>(std::numeric_limits<float>::max())) return std::numeric_limits<float>::infinity();
  if (x < -static_cast<double>(std::numeric_limits<float>::max())) return -std::numeric_limits<float>::infinity();
  return static_cast<float>(x);
}

template <typename T>
T load_le(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // x86-64 and aarch64 are little-endian, as ONNX's raw_data
  return v;
}

// Number of values a typed (non-raw) field holds for this dtype.
size_t typed_field_count(const onnx::TensorProto& t) {
  switch (static_cast<DType>(t.data_type())) {
    case DType::Float: return static_cast<size_t>(t.float_data_size());
    case DType::Double: return static_cast<size_t>(t.double_data_size());
    case DType::Int64: return static_cast<size_t>(t.int64_data_size());
    case DType::UInt32:
    case DType::UInt64: return static_cast<size_t>(t.uint64_data_size());
    case DType::String: return static_cast<size_t>(t.string_data_size());
    case DType::Complex64: return static_cast<size_t>(t.float_data_size()) / 2;
    case DType::Complex128: return static_cast<size_t>(t.double_data_size()) / 2;
    case DType::Int4:
    case DType::UInt4: return static_cast<size_t>(t.int32_data_size()) * 2;  // two per int32
    default: return static_cast<size_t>(t.int32_data_size());
  }
}

bool has_typed_data(const onnx::TensorProto& t) {
  return t.float_data_size() > 0 || t.double_data_size() > 0 || t.int32_data_size() > 0 ||
         t.int64_data_size() > 0 || t.uint64_data_size() > 0 || t.string_data_size() > 0;
}

}  // namespace

std::optional<uint64_t> element_count(const std::vector<int64_t>& dims) {
  uint64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return std::nullopt;
    const auto u = static_cast<uint64_t>(d);
    if (u != 0 && n > std::numeric_limits<uint64_t>::max() / u) return std::nullopt;
    n *= u;
  }
  return n;
}

DataState data_state(const onnx::TensorProto& t) {
  if (t.data_location() == onnx::TensorProto_DataLocation_EXTERNAL || t.external_data_size() > 0) {
    return DataState::External;
  }
  if (!t.raw_data().empty() || has_typed_data(t)) return DataState::Inline;
  return DataState::Absent;
}

std::optional<std::string> check_tensor_data(const onnx::TensorProto& t) {
  if (data_state(t) != DataState::Inline) return std::nullopt;
  std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
  const auto count = element_count(dims);
  if (!count) return std::string("has a negative or overflowing dimension");
  const auto dtype = static_cast<DType>(t.data_type());
  if (!t.raw_data().empty()) {
    const auto bytes = storage_bytes(dtype, *count);
    if (!bytes) return std::nullopt;  // strings cannot be raw; nothing to compare
    if (*bytes != t.raw_data().size()) {
      return "holds " + std::to_string(t.raw_data().size()) + " bytes of data but its dims and type need " +
             std::to_string(*bytes);
    }
    return std::nullopt;
  }
  const size_t have = typed_field_count(t);
  if (have != *count) {
    // int4 packs two values per int32: allow the odd count's padding nibble.
    const bool packed = dtype == DType::Int4 || dtype == DType::UInt4;
    if (!(packed && have == *count + 1)) {
      return "holds " + std::to_string(have) + " values but its dims need " + std::to_string(*count);
    }
  }
  return std::nullopt;
}

std::optional<TensorValue> read_tensor_value(const onnx::TensorProto& t) {
  if (data_state(t) != DataState::Inline || check_tensor_data(t)) return std::nullopt;
  TensorValue v;
  v.dtype = static_cast<DType>(t.data_type());
  v.dims.assign(t.dims().begin(), t.dims().end());
  const auto count = element_count(v.dims);
  if (!count || *count > kMaxFoldElements) return std::nullopt;
  const size_t n = *count;
  const bool raw = !t.raw_data().empty();
  const char* p = t.raw_data().data();
  auto put_int = [&](int64_t x) { v.ints.push_back(x); };
  auto put_real = [&](double x) { v.reals.push_back(x); };
  for (size_t i = 0; i < n; ++i) {
    switch (v.dtype) {
      case DType::Float: put_real(raw ? load_le<float>(p + 4 * i) : t.float_data(static_cast<int>(i))); break;
      case DType::Double: put_real(raw ? load_le<double>(p + 8 * i) : t.double_data(static_cast<int>(i))); break;
      case DType::Float16:
        put_real(half_to_double(raw ? load_le<uint16_t>(p + 2 * i)
                                    : static_cast<uint16_t>(t.int32_data(static_cast<int>(i)))));
        break;
      case DType::BFloat16:
        put_real(bfloat16_to_double(raw ? load_le<uint16_t>(p + 2 * i)
                                        : static_cast<uint16_t>(t.int32_data(static_cast<int>(i)))));
        break;
      case DType::Int64: put_int(raw ? load_le<int64_t>(p + 8 * i) : t.int64_data(static_cast<int>(i))); break;
      case DType::Int32: put_int(raw ? load_le<int32_t>(p + 4 * i) : t.int32_data(static_cast<int>(i))); break;
      case DType::Int16: put_int(raw ? load_le<int16_t>(p + 2 * i) : t.int32_data(static_cast<int>(i))); break;
      case DType::UInt16: put_int(raw ? load_le<uint16_t>(p + 2 * i) : t.int32_data(static_cast<int>(i))); break;
      case DType::Int8: put_int(raw ? load_le<int8_t>(p + i) : t.int32_data(static_cast<int>(i))); break;
      case DType::UInt8:
      case DType::Bool: put_int(raw ? load_le<uint8_t>(p + i) : t.int32_data(static_cast<int>(i))); break;
      case DType::UInt32:
        put_int(raw ? load_le<uint32_t>(p + 4 * i) : static_cast<int64_t>(t.uint64_data(static_cast<int>(i))));
        break;
      case DType::UInt64:
        put_int(static_cast<int64_t>(raw ? load_le<uint64_t>(p + 8 * i) : t.uint64_data(static_cast<int>(i))));
        break;
      default: return std::nullopt;  // strings, complex, packed and 8-bit floats: never shape data
    }
  }
  return v;
}

TensorValue TensorValue::filled(DType dtype, std::vector<int64_t> dims, double fill) {
  TensorValue v;
  v.dtype = dtype;
  v.dims = std::move(dims);
  const size_t n = element_count(v.dims).value_or(0);
  if (v.floating()) {
    v.reals.assign(n, fill);
  } else {
    v.ints.assign(n, static_cast<int64_t>(fill));
  }
  return v;
}

onnx::TensorProto TensorValue::to_proto() const {
  onnx::TensorProto t;
  t.set_data_type(static_cast<int32_t>(dtype));
  for (int64_t d : dims) t.add_dims(d);
  switch (dtype) {
    case DType::Float:
      for (double x : reals) t.add_float_data(to_float(x));
      break;
    case DType::Double:
      for (double x : reals) t.add_double_data(x);
      break;
    case DType::Int64:
      for (int64_t x : ints) t.add_int64_data(x);
      break;
    case DType::UInt32:
    case DType::UInt64:
      for (int64_t x : ints) t.add_uint64_data(static_cast<uint64_t>(x));
      break;
    case DType::Float16:
    case DType::BFloat16:
      // Shape inference never reads these as shapes; store as float32 values
      // with the declared type kept so the consumer sees the right dtype.
      t.set_data_type(static_cast<int32_t>(DType::Float));
      for (double x : reals) t.add_float_data(to_float(x));
      break;
    default:
      for (int64_t x : ints) t.add_int32_data(static_cast<int32_t>(x));
      break;
  }
  return t;
}

}  // namespace gpumem::detail
