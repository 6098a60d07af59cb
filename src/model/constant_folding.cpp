#include "model/constant_folding.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>

namespace gpumem::detail {
namespace {

using Dims = std::vector<int64_t>;
using Result = std::optional<std::vector<TensorValue>>;

const onnx::AttributeProto* find_attr(const onnx::NodeProto& n, const char* name) {
  for (const auto& a : n.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

int64_t attr_int(const onnx::NodeProto& n, const char* name, int64_t fallback) {
  const auto* a = find_attr(n, name);
  return a ? a->i() : fallback;
}

std::optional<Dims> attr_ints(const onnx::NodeProto& n, const char* name) {
  const auto* a = find_attr(n, name);
  if (!a) return std::nullopt;
  return Dims(a->ints().begin(), a->ints().end());
}

// Shape tensors have rank 1; no real constant the folder sees has more axes.
constexpr size_t kMaxFoldRank = 64;

// The loops below walk the outer, inner and stride products of a value's
// dims, so zero dims do not make a value small: [2^62, 0] holds nothing but
// would be iterated 2^62 times. Every non-zero dim counts, as does the rank
// (each element costs one step per axis).
bool small_enough(const Dims& dims) {
  if (dims.size() > kMaxFoldRank) return false;
  uint64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return false;
    if (d == 0) continue;
    if (static_cast<uint64_t>(d) > kMaxFoldElements) return false;
    n *= static_cast<uint64_t>(d);  // both factors <= 2^16: no overflow
    if (n > kMaxFoldElements) return false;
  }
  return true;
}

// The integer a floating value stands for: truncated toward zero, saturated
// to the int64 range, NaN as 0 (a plain cast of an out-of-range double is
// undefined behaviour).
int64_t to_int(double r) {
  if (std::isnan(r)) return 0;
  if (r >= 9223372036854775807.0) return std::numeric_limits<int64_t>::max();  // the literal rounds to 2^63
  if (r <= -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(r);
}

int64_t int_at(const TensorValue& v, size_t i) { return v.floating() ? to_int(v.reals[i]) : v.ints[i]; }

Result one(TensorValue v) {
  if (!small_enough(v.dims)) return std::nullopt;
  std::vector<TensorValue> out;
  out.push_back(std::move(v));
  return out;
}

Dims strides_of(const Dims& dims) {
  Dims s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

// Normalises a possibly negative axis against `rank`; nullopt when out of range.
std::optional<int64_t> norm_axis(int64_t axis, int64_t rank) {
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return std::nullopt;
  return axis;
}

std::optional<Dims> broadcast(const Dims& a, const Dims& b) {
  const size_t rank = std::max(a.size(), b.size());
  Dims out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Flat index into `in` (right-aligned, broadcast) for flat index `flat` of `out`.
size_t broadcast_index(size_t flat, const Dims& out, const Dims& out_strides, const Dims& in) {
  size_t idx = 0;
  size_t in_stride = 1;
  const size_t offset = out.size() - in.size();
  for (size_t i = out.size(); i-- > offset;) {
    const int64_t coord = (static_cast<int64_t>(flat) / out_strides[i]) % out[i];
    const int64_t din = in[i - offset];
    if (din != 1) idx += static_cast<size_t>(coord) * in_stride;
    in_stride *= static_cast<size_t>(din);
  }
  return idx;
}

TensorValue empty_like(DType dtype, Dims dims) { return TensorValue::filled(dtype, std::move(dims), 0.0); }

void set(TensorValue& v, size_t i, double real, int64_t integer) {
  if (v.floating()) {
    v.reals[i] = real;
  } else {
    v.ints[i] = integer;
  }
}

// Copies element `j` of `src` to element `i` of `dst` (same dtype family).
void copy_element(TensorValue& dst, size_t i, const TensorValue& src, size_t j) {
  if (dst.floating()) {
    dst.reals[i] = src.real(j);
  } else {
    dst.ints[i] = int_at(src, j);
  }
}

enum class BinOp { Add, Sub, Mul, Div, Mod, Pow, Max, Min, Equal, Less, Greater, LessEq, GreaterEq, And, Or, Xor };

std::optional<BinOp> binop_of(const std::string& op) {
  static const std::pair<const char*, BinOp> kOps[] = {
      {"Add", BinOp::Add},         {"Sub", BinOp::Sub},       {"Mul", BinOp::Mul},
      {"Div", BinOp::Div},         {"Mod", BinOp::Mod},       {"Pow", BinOp::Pow},
      {"Max", BinOp::Max},         {"Min", BinOp::Min},       {"Equal", BinOp::Equal},
      {"Less", BinOp::Less},       {"Greater", BinOp::Greater}, {"LessOrEqual", BinOp::LessEq},
      {"GreaterOrEqual", BinOp::GreaterEq}, {"And", BinOp::And}, {"Or", BinOp::Or},
      {"Xor", BinOp::Xor}};
  for (const auto& [name, code] : kOps) {
    if (op == name) return code;
  }
  return std::nullopt;
}

bool is_comparison(BinOp op) {
  return op == BinOp::Equal || op == BinOp::Less || op == BinOp::Greater || op == BinOp::LessEq ||
         op == BinOp::GreaterEq || op == BinOp::And || op == BinOp::Or || op == BinOp::Xor;
}

// Integer arithmetic with the C semantics ONNX runtimes use; nullopt on
// division by zero or overflow (a corrupt constant, never a real shape).
std::optional<int64_t> int_binop(BinOp op, int64_t a, int64_t b, bool fmod) {
  int64_t r = 0;
  switch (op) {
    case BinOp::Add: if (__builtin_add_overflow(a, b, &r)) return std::nullopt; return r;
    case BinOp::Sub: if (__builtin_sub_overflow(a, b, &r)) return std::nullopt; return r;
    case BinOp::Mul: if (__builtin_mul_overflow(a, b, &r)) return std::nullopt; return r;
    case BinOp::Div:
      if (b == 0 || (a == std::numeric_limits<int64_t>::min() && b == -1)) return std::nullopt;
      return a / b;
    case BinOp::Mod: {
      if (b == 0 || (a == std::numeric_limits<int64_t>::min() && b == -1)) return std::nullopt;
      r = a % b;
      if (!fmod && r != 0 && ((r < 0) != (b < 0))) r += b;  // sign of the divisor, as numpy
      return r;
    }
    case BinOp::Pow: {
      if (b < 0 || b > 62) return std::nullopt;
      int64_t p = 1;
      for (int64_t i = 0; i < b; ++i) {
        if (__builtin_mul_overflow(p, a, &p)) return std::nullopt;
      }
      return p;
    }
    case BinOp::Max: return std::max(a, b);
    case BinOp::Min: return std::min(a, b);
    case BinOp::Equal: return a == b;
    case BinOp::Less: return a < b;
    case BinOp::Greater: return a > b;
    case BinOp::LessEq: return a <= b;
    case BinOp::GreaterEq: return a >= b;
    case BinOp::And: return (a != 0) && (b != 0);
    case BinOp::Or: return (a != 0) || (b != 0);
    case BinOp::Xor: return (a != 0) != (b != 0);
  }
  return std::nullopt;
}

double real_binop(BinOp op, double a, double b, bool fmod) {
  switch (op) {
    case BinOp::Add: return a + b;
    case BinOp::Sub: return a - b;
    case BinOp::Mul: return a * b;
    case BinOp::Div: return a / b;
    case BinOp::Mod: return fmod ? std::fmod(a, b) : a - b * std::floor(a / b);
    case BinOp::Pow: return std::pow(a, b);
    case BinOp::Max: return std::max(a, b);
    case BinOp::Min: return std::min(a, b);
    case BinOp::Equal: return a == b;
    case BinOp::Less: return a < b;
    case BinOp::Greater: return a > b;
    case BinOp::LessEq: return a <= b;
    case BinOp::GreaterEq: return a >= b;
    case BinOp::And: return (a != 0) && (b != 0);
    case BinOp::Or: return (a != 0) || (b != 0);
    case BinOp::Xor: return (a != 0) != (b != 0);
  }
  return 0;
}

std::optional<TensorValue> binary(BinOp op, const TensorValue& a, const TensorValue& b, bool fmod) {
  const auto dims = broadcast(a.dims, b.dims);
  if (!dims || !small_enough(*dims)) return std::nullopt;
  const DType out_type = is_comparison(op) ? DType::Bool : a.dtype;
  TensorValue out = empty_like(out_type, *dims);
  const Dims strides = strides_of(*dims);
  const bool reals = a.floating() || b.floating();
  for (size_t i = 0; i < out.size(); ++i) {
    const size_t ia = broadcast_index(i, *dims, strides, a.dims);
    const size_t ib = broadcast_index(i, *dims, strides, b.dims);
    if (reals) {
      const double r = real_binop(op, a.real(ia), b.real(ib), fmod);
      set(out, i, r, to_int(r));
    } else {
      const auto r = int_binop(op, a.ints[ia], b.ints[ib], fmod);
      if (!r) return std::nullopt;
      set(out, i, static_cast<double>(*r), *r);
    }
  }
  return out;
}

std::optional<TensorValue> unary(const std::string& op, const TensorValue& x) {
  // Not's result is bool whatever its input: start from an integer value.
  TensorValue out = op == "Not" ? empty_like(DType::Bool, x.dims) : x;
  for (size_t i = 0; i < x.size(); ++i) {
    const double r = x.real(i);
    const int64_t n = int_at(x, i);
    if ((op == "Neg" || op == "Abs") && !x.floating() && n == std::numeric_limits<int64_t>::min()) {
      return std::nullopt;  // -INT64_MIN overflows
    }
    if (op == "Neg") {
      set(out, i, -r, -n);
    } else if (op == "Abs") {
      set(out, i, std::fabs(r), n < 0 ? -n : n);
    } else if (op == "Floor") {
      set(out, i, std::floor(r), n);
    } else if (op == "Ceil") {
      set(out, i, std::ceil(r), n);
    } else if (op == "Sqrt") {
      set(out, i, std::sqrt(r), to_int(std::sqrt(r)));
    } else if (op == "Not") {
      set(out, i, r == 0, r == 0);
    } else if (op == "Sign") {
      set(out, i, (r > 0) - (r < 0), (n > 0) - (n < 0));
    } else if (op == "Reciprocal") {
      if (!out.floating()) return std::nullopt;
      set(out, i, 1.0 / r, 0);
    } else {
      return std::nullopt;
    }
  }
  return out;
}

std::optional<TensorValue> cast(const TensorValue& x, int64_t to) {
  if (!is_known_dtype(static_cast<int32_t>(to))) return std::nullopt;
  const auto dtype = static_cast<DType>(to);
  if (dtype_bits(dtype) == 0 || dtype_bits(dtype) < 8) return std::nullopt;
  TensorValue out = empty_like(dtype, x.dims);
  for (size_t i = 0; i < x.size(); ++i) {
    const double r = x.real(i);
    if (out.floating()) {
      out.reals[i] = r;
    } else if (dtype == DType::Bool) {
      out.ints[i] = r != 0;
    } else if (x.floating()) {
      if (!std::isfinite(r) || std::fabs(r) > 9.2e18) return std::nullopt;
      out.ints[i] = static_cast<int64_t>(r);  // truncation toward zero
    } else {
      out.ints[i] = x.ints[i];
    }
  }
  return out;
}

std::optional<TensorValue> gather(const TensorValue& data, const TensorValue& indices, int64_t axis_attr) {
  const auto rank = static_cast<int64_t>(data.dims.size());
  const auto axis = norm_axis(axis_attr, rank);
  if (!axis || indices.floating()) return std::nullopt;
  Dims dims(data.dims.begin(), data.dims.begin() + *axis);
  dims.insert(dims.end(), indices.dims.begin(), indices.dims.end());
  dims.insert(dims.end(), data.dims.begin() + *axis + 1, data.dims.end());
  if (!small_enough(dims)) return std::nullopt;
  TensorValue out = empty_like(data.dtype, dims);
  const int64_t axis_len = data.dims[static_cast<size_t>(*axis)];
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < *axis; ++i) outer *= data.dims[static_cast<size_t>(i)];
  for (int64_t i = *axis + 1; i < rank; ++i) inner *= data.dims[static_cast<size_t>(i)];
  size_t pos = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (size_t k = 0; k < indices.size(); ++k) {
      int64_t idx = indices.ints[k];
      if (idx < 0) idx += axis_len;
      if (idx < 0 || idx >= axis_len) return std::nullopt;
      for (int64_t in = 0; in < inner; ++in) {
        copy_element(out, pos++, data, static_cast<size_t>((o * axis_len + idx) * inner + in));
      }
    }
  }
  return out;
}

std::optional<TensorValue> concat(const std::vector<const TensorValue*>& parts, int64_t axis_attr) {
  if (parts.empty() || !parts[0]) return std::nullopt;
  const auto rank = static_cast<int64_t>(parts[0]->dims.size());
  const auto axis = norm_axis(axis_attr, rank);
  if (!axis) return std::nullopt;
  Dims dims = parts[0]->dims;
  dims[static_cast<size_t>(*axis)] = 0;
  for (const auto* p : parts) {
    if (!p || static_cast<int64_t>(p->dims.size()) != rank) return std::nullopt;
    for (int64_t d = 0; d < rank; ++d) {
      if (d != *axis && p->dims[static_cast<size_t>(d)] != dims[static_cast<size_t>(d)]) return std::nullopt;
    }
    dims[static_cast<size_t>(*axis)] += p->dims[static_cast<size_t>(*axis)];
  }
  if (!small_enough(dims)) return std::nullopt;
  TensorValue out = empty_like(parts[0]->dtype, dims);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < *axis; ++i) outer *= dims[static_cast<size_t>(i)];
  for (int64_t i = *axis + 1; i < rank; ++i) inner *= dims[static_cast<size_t>(i)];
  size_t pos = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (const auto* p : parts) {
      const int64_t chunk = p->dims[static_cast<size_t>(*axis)] * inner;
      for (int64_t j = 0; j < chunk; ++j) copy_element(out, pos++, *p, static_cast<size_t>(o * chunk + j));
    }
  }
  return out;
}

std::optional<TensorValue> reshape(const TensorValue& data, const TensorValue& shape, bool allow_zero) {
  if (shape.floating() || shape.dims.size() != 1) return std::nullopt;
  Dims dims(shape.ints.begin(), shape.ints.end());
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0 && !allow_zero) {
      if (i >= data.dims.size()) return std::nullopt;
      dims[i] = data.dims[i];
    }
    if (dims[i] == -1) {
      if (infer >= 0) return std::nullopt;
      infer = static_cast<int>(i);
    } else if (dims[i] < 0) {
      return std::nullopt;
    } else if (__builtin_mul_overflow(known, dims[i], &known)) {
      return std::nullopt;  // no tensor holds 2^63 elements
    }
  }
  const auto total = static_cast<int64_t>(data.size());
  if (infer >= 0) {
    if (known == 0 || total % known != 0) return std::nullopt;
    dims[static_cast<size_t>(infer)] = total / known;
  } else if (known != total) {
    return std::nullopt;
  }
  TensorValue out = data;
  out.dims = std::move(dims);
  return out;
}

std::optional<TensorValue> unsqueeze(const TensorValue& data, Dims axes) {
  const auto rank = static_cast<int64_t>(data.dims.size() + axes.size());
  for (auto& a : axes) {
    const auto n = norm_axis(a, rank);
    if (!n) return std::nullopt;
    a = *n;
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) return std::nullopt;
  Dims dims;
  size_t src = 0, k = 0;
  for (int64_t i = 0; i < rank; ++i) {
    if (k < axes.size() && axes[k] == i) {
      dims.push_back(1);
      ++k;
    } else {
      dims.push_back(data.dims[src++]);
    }
  }
  TensorValue out = data;
  out.dims = std::move(dims);
  return out;
}

std::optional<TensorValue> squeeze(const TensorValue& data, const std::optional<Dims>& axes) {
  const auto rank = static_cast<int64_t>(data.dims.size());
  std::vector<bool> drop(data.dims.size(), false);
  if (axes) {
    for (int64_t a : *axes) {
      const auto n = norm_axis(a, rank);
      if (!n || data.dims[static_cast<size_t>(*n)] != 1) return std::nullopt;
      drop[static_cast<size_t>(*n)] = true;
    }
  } else {
    for (size_t i = 0; i < data.dims.size(); ++i) drop[i] = data.dims[i] == 1;
  }
  TensorValue out = data;
  out.dims.clear();
  for (size_t i = 0; i < data.dims.size(); ++i) {
    if (!drop[i]) out.dims.push_back(data.dims[i]);
  }
  return out;
}

std::optional<TensorValue> slice(const TensorValue& data, const Dims& starts, const Dims& ends,
                                 std::optional<Dims> axes_in, std::optional<Dims> steps_in) {
  const auto rank = static_cast<int64_t>(data.dims.size());
  if (starts.size() != ends.size()) return std::nullopt;
  Dims axes = axes_in.value_or(Dims{});
  if (!axes_in) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  Dims steps = steps_in.value_or(Dims(starts.size(), 1));
  if (axes.size() != starts.size() || steps.size() != starts.size()) return std::nullopt;
  Dims begin(data.dims.size(), 0), step(data.dims.size(), 1), dims = data.dims;
  for (size_t k = 0; k < axes.size(); ++k) {
    const auto axis = norm_axis(axes[k], rank);
    if (!axis || steps[k] == 0) return std::nullopt;
    const auto a = static_cast<size_t>(*axis);
    const int64_t len = data.dims[a];
    auto clamp = [&](int64_t v, bool positive_step) {
      if (v < 0) v += len;
      return positive_step ? std::clamp<int64_t>(v, 0, len) : std::clamp<int64_t>(v, -1, len - 1);
    };
    const bool pos = steps[k] > 0;
    const int64_t s = clamp(starts[k], pos);
    const int64_t e = clamp(ends[k], pos);
    // ceil(distance / |step|), written so that a step near the int64 limits
    // cannot overflow: (e - s - 1) / step rounds toward zero.
    const int64_t count = pos ? (e > s ? (e - s - 1) / steps[k] + 1 : 0) : (s > e ? 1 - (s - e - 1) / steps[k] : 0);
    begin[a] = s;
    step[a] = steps[k];
    dims[a] = count;
  }
  if (!small_enough(dims)) return std::nullopt;
  TensorValue out = empty_like(data.dtype, dims);
  const Dims out_strides = strides_of(dims);
  const Dims in_strides = strides_of(data.dims);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t src = 0;
    for (size_t d = 0; d < dims.size(); ++d) {
      const int64_t coord = (static_cast<int64_t>(i) / out_strides[d]) % dims[d];
      src += (begin[d] + coord * step[d]) * in_strides[d];
    }
    copy_element(out, i, data, static_cast<size_t>(src));
  }
  return out;
}

std::optional<TensorValue> expand(const TensorValue& data, const TensorValue& shape) {
  if (shape.floating() || shape.dims.size() != 1) return std::nullopt;
  const auto dims = broadcast(data.dims, Dims(shape.ints.begin(), shape.ints.end()));
  if (!dims || !small_enough(*dims)) return std::nullopt;
  TensorValue out = empty_like(data.dtype, *dims);
  const Dims strides = strides_of(*dims);
  for (size_t i = 0; i < out.size(); ++i) copy_element(out, i, data, broadcast_index(i, *dims, strides, data.dims));
  return out;
}

std::optional<TensorValue> where(const TensorValue& cond, const TensorValue& x, const TensorValue& y) {
  const auto xy = broadcast(x.dims, y.dims);
  if (!xy) return std::nullopt;
  const auto dims = broadcast(cond.dims, *xy);
  if (!dims || !small_enough(*dims)) return std::nullopt;
  TensorValue out = empty_like(x.dtype, *dims);
  const Dims strides = strides_of(*dims);
  for (size_t i = 0; i < out.size(); ++i) {
    const bool c = cond.real(broadcast_index(i, *dims, strides, cond.dims)) != 0;
    const TensorValue& src = c ? x : y;
    copy_element(out, i, src, broadcast_index(i, *dims, strides, src.dims));
  }
  return out;
}

std::optional<TensorValue> range(const TensorValue& start, const TensorValue& limit, const TensorValue& delta) {
  if (start.size() != 1 || limit.size() != 1 || delta.size() != 1) return std::nullopt;
  const double s = start.real(0), l = limit.real(0), d = delta.real(0);
  if (d == 0 || !std::isfinite(s) || !std::isfinite(l) || !std::isfinite(d)) return std::nullopt;
  const double n = std::max(0.0, std::ceil((l - s) / d));
  if (n > static_cast<double>(kMaxFoldElements)) return std::nullopt;
  TensorValue out = empty_like(start.dtype, {static_cast<int64_t>(n)});
  if (out.floating()) {
    for (size_t i = 0; i < out.size(); ++i) out.reals[i] = s + static_cast<double>(i) * d;
    return out;
  }
  // Integer ranges step exactly; a corrupt one may walk off the int64 range.
  int64_t v = int_at(start, 0);
  const int64_t step = int_at(delta, 0);
  for (size_t i = 0; i < out.size(); ++i) {
    if (i > 0 && __builtin_add_overflow(v, step, &v)) return std::nullopt;
    out.ints[i] = v;
  }
  return out;
}

std::optional<TensorValue> constant_of_shape(const onnx::NodeProto& node, const TensorValue& shape) {
  if (shape.floating()) return std::nullopt;
  Dims dims(shape.ints.begin(), shape.ints.end());
  if (!small_enough(dims)) return std::nullopt;
  DType dtype = DType::Float;
  double fill = 0;
  if (const auto* a = find_attr(node, "value"); a && a->has_t()) {
    const auto v = read_tensor_value(a->t());
    if (!v || v->size() != 1) return std::nullopt;
    dtype = v->dtype;
    fill = v->real(0);
  }
  return TensorValue::filled(dtype, std::move(dims), fill);
}

std::optional<TensorValue> transpose(const TensorValue& data, std::optional<Dims> perm) {
  const size_t rank = data.dims.size();
  if (!perm) {
    perm.emplace();
    for (size_t i = rank; i-- > 0;) perm->push_back(static_cast<int64_t>(i));
  }
  if (perm->size() != rank) return std::nullopt;
  Dims dims(rank);
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < rank; ++i) {
    const auto p = norm_axis((*perm)[i], static_cast<int64_t>(rank));
    if (!p || seen[static_cast<size_t>(*p)]) return std::nullopt;
    seen[static_cast<size_t>(*p)] = true;
    (*perm)[i] = *p;
    dims[i] = data.dims[static_cast<size_t>(*p)];
  }
  TensorValue out = empty_like(data.dtype, dims);
  const Dims out_strides = strides_of(dims);
  const Dims in_strides = strides_of(data.dims);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t src = 0;
    for (size_t d = 0; d < rank; ++d) {
      src += ((static_cast<int64_t>(i) / out_strides[d]) % dims[d]) * in_strides[static_cast<size_t>((*perm)[d])];
    }
    copy_element(out, i, data, static_cast<size_t>(src));
  }
  return out;
}

std::optional<TensorValue> reduce(const std::string& op, const TensorValue& data, std::optional<Dims> axes,
                                  bool keepdims, bool noop_with_empty_axes) {
  const auto rank = static_cast<int64_t>(data.dims.size());
  std::vector<bool> reduced(data.dims.size(), false);
  if (!axes || axes->empty()) {
    if (noop_with_empty_axes) return data;
    std::fill(reduced.begin(), reduced.end(), true);
  } else {
    for (int64_t a : *axes) {
      const auto n = norm_axis(a, rank);
      if (!n) return std::nullopt;
      reduced[static_cast<size_t>(*n)] = true;
    }
  }
  Dims kept_dims;  // output dims with keepdims
  for (size_t i = 0; i < data.dims.size(); ++i) kept_dims.push_back(reduced[i] ? 1 : data.dims[i]);
  TensorValue out = empty_like(data.dtype, kept_dims);
  std::vector<bool> touched(out.size(), false);
  const Dims in_strides = strides_of(data.dims);
  const Dims out_strides = strides_of(kept_dims);
  for (size_t i = 0; i < data.size(); ++i) {
    size_t o = 0;
    for (size_t d = 0; d < data.dims.size(); ++d) {
      const int64_t coord = (static_cast<int64_t>(i) / in_strides[d]) % data.dims[d];
      if (!reduced[d]) o += static_cast<size_t>(coord * out_strides[d]);
    }
    if (!touched[o]) {
      copy_element(out, o, data, i);
      touched[o] = true;
      continue;
    }
    if (data.floating()) {  // out has data's dtype: the same family
      const double r = data.reals[i];
      double& acc = out.reals[o];
      if (op == "ReduceSum") {
        acc += r;
      } else if (op == "ReduceProd") {
        acc *= r;
      } else if (op == "ReduceMax") {
        acc = std::max(acc, r);
      } else if (op == "ReduceMin") {
        acc = std::min(acc, r);
      } else {
        return std::nullopt;
      }
    } else {
      const int64_t n = data.ints[i];
      int64_t& acc = out.ints[o];
      if (op == "ReduceSum") {
        if (__builtin_add_overflow(acc, n, &acc)) return std::nullopt;
      } else if (op == "ReduceProd") {
        if (__builtin_mul_overflow(acc, n, &acc)) return std::nullopt;
      } else if (op == "ReduceMax") {
        acc = std::max(acc, n);
      } else if (op == "ReduceMin") {
        acc = std::min(acc, n);
      } else {
        return std::nullopt;
      }
    }
  }
  if (!keepdims) {
    Dims dims;
    for (size_t i = 0; i < kept_dims.size(); ++i) {
      if (!reduced[i]) dims.push_back(kept_dims[i]);
    }
    out.dims = std::move(dims);
  }
  return out;
}

std::optional<Dims> ints_of(const TensorValue* v) {
  if (!v || v->floating()) return std::nullopt;
  return v->ints;
}

}  // namespace

std::optional<std::vector<TensorValue>> fold_node(const onnx::NodeProto& node, int64_t opset, const FoldInputs& in) {
  const std::string& op = node.op_type();
  if (!node.domain().empty() && node.domain() != "ai.onnx") return std::nullopt;
  const size_t n_in = in.values.size();
  auto value = [&](size_t i) -> const TensorValue* { return i < n_in ? in.values[i] : nullptr; };

  if (op == "Shape" || op == "Size") {
    if (in.shapes.empty() || !in.shapes[0]) return std::nullopt;
    const Dims& shape = *in.shapes[0];
    if (op == "Size") {
      const auto n = element_count(shape);
      if (!n || *n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
      return one(TensorValue{DType::Int64, {}, {static_cast<int64_t>(*n)}, {}});
    }
    const auto rank = static_cast<int64_t>(shape.size());
    int64_t start = opset >= 15 ? attr_int(node, "start", 0) : 0;
    int64_t end = opset >= 15 ? attr_int(node, "end", rank) : rank;
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = std::clamp<int64_t>(start, 0, rank);
    end = std::clamp<int64_t>(end, 0, rank);
    Dims vals(shape.begin() + start, shape.begin() + std::max(start, end));
    const auto len = static_cast<int64_t>(vals.size());
    return one(TensorValue{DType::Int64, {len}, std::move(vals), {}});
  }

  // Every other op needs all of its present inputs' values, and its first
  // input (an omitted one, "", has no value). A constant read from the file
  // may have any rank: the loops below need small ones.
  for (int i = 0; i < node.input_size(); ++i) {
    if (node.input(i).empty()) continue;
    const TensorValue* v = value(static_cast<size_t>(i));
    if (!v || !small_enough(v->dims)) return std::nullopt;
  }
  const TensorValue* x = value(0);
  if (node.input_size() == 0 || node.input(0).empty() || !x) return std::nullopt;

  std::optional<TensorValue> r;
  if (op == "Identity") {
    r = *x;
  } else if (const auto bop = binop_of(op)) {
    if (!x) return std::nullopt;
    r = *x;
    for (int i = 1; i < node.input_size(); ++i) {  // Max/Min are variadic
      if (node.input(i).empty()) return std::nullopt;
      r = binary(*bop, *r, *value(static_cast<size_t>(i)), attr_int(node, "fmod", 0) != 0);
      if (!r) return std::nullopt;
    }
    if (node.input_size() < 2 && op != "Max" && op != "Min") return std::nullopt;
  } else if (op == "Neg" || op == "Abs" || op == "Floor" || op == "Ceil" || op == "Sqrt" || op == "Not" ||
             op == "Sign" || op == "Reciprocal") {
    r = unary(op, *x);
  } else if (op == "Cast") {
    r = cast(*x, attr_int(node, "to", 0));
  } else if (op == "Gather") {
    if (!value(1)) return std::nullopt;
    r = gather(*x, *value(1), attr_int(node, "axis", 0));
  } else if (op == "Concat") {
    std::vector<const TensorValue*> parts;
    for (int i = 0; i < node.input_size(); ++i) parts.push_back(value(static_cast<size_t>(i)));
    r = concat(parts, attr_int(node, "axis", 0));
  } else if (op == "Unsqueeze") {
    const auto axes = opset >= 13 ? ints_of(value(1)) : attr_ints(node, "axes");
    if (!axes) return std::nullopt;
    r = unsqueeze(*x, *axes);
  } else if (op == "Squeeze") {
    std::optional<Dims> axes = opset >= 13 ? ints_of(value(1)) : attr_ints(node, "axes");
    if (opset >= 13 && node.input_size() > 1 && !node.input(1).empty() && !axes) return std::nullopt;
    r = squeeze(*x, axes);
  } else if (op == "Slice") {
    if (opset < 10) {
      const auto starts = attr_ints(node, "starts");
      const auto ends = attr_ints(node, "ends");
      if (!starts || !ends) return std::nullopt;
      r = slice(*x, *starts, *ends, attr_ints(node, "axes"), std::nullopt);
    } else {
      const auto starts = ints_of(value(1));
      const auto ends = ints_of(value(2));
      if (!starts || !ends) return std::nullopt;
      r = slice(*x, *starts, *ends, ints_of(value(3)), ints_of(value(4)));
    }
  } else if (op == "Reshape") {
    if (!value(1)) return std::nullopt;
    r = reshape(*x, *value(1), attr_int(node, "allowzero", 0) != 0);
  } else if (op == "Expand") {
    if (!value(1)) return std::nullopt;
    r = expand(*x, *value(1));
  } else if (op == "Where") {
    if (!value(1) || !value(2)) return std::nullopt;
    r = where(*x, *value(1), *value(2));
  } else if (op == "Range") {
    if (!value(1) || !value(2)) return std::nullopt;
    r = range(*x, *value(1), *value(2));
  } else if (op == "ConstantOfShape") {
    r = constant_of_shape(node, *x);
  } else if (op == "Transpose") {
    r = transpose(*x, attr_ints(node, "perm"));
  } else if (op == "ReduceSum" || op == "ReduceProd" || op == "ReduceMax" || op == "ReduceMin") {
    // Axes moved from attribute to input in opset 13 (ReduceSum) / 18 (others).
    const bool axes_input = (op == "ReduceSum" && opset >= 13) || opset >= 18;
    const auto axes = axes_input ? ints_of(value(1)) : attr_ints(node, "axes");
    r = reduce(op, *x, axes, attr_int(node, "keepdims", 1) != 0,
               axes_input && attr_int(node, "noop_with_empty_axes", 0) != 0);
  } else {
    return std::nullopt;
  }
  if (!r) return std::nullopt;
  if (node.output_size() != 1) return std::nullopt;
  return one(std::move(*r));
}

}  // namespace gpumem::detail
