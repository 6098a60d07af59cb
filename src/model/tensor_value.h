#pragma once
// Small constant tensors that shape arithmetic works on at load time: the
// values of Constant nodes, of initializers that carry data, and of nodes
// folded from them. Integers (and bools) are held as int64, floating types as
// double; nothing large is ever materialised (see kMaxFoldElements).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "gpumem/model/dtype.h"

namespace gpumem::detail {

// Shape arithmetic never needs more: a shape tensor has one value per
// dimension. Larger constants are left to the runtime.
inline constexpr uint64_t kMaxFoldElements = 1u << 16;

struct TensorValue {
  DType dtype = DType::Int64;
  std::vector<int64_t> dims;
  std::vector<int64_t> ints;   // when !floating()
  std::vector<double> reals;   // when floating()

  bool floating() const { return is_floating(dtype); }
  size_t size() const { return floating() ? reals.size() : ints.size(); }
  double real(size_t i) const { return floating() ? reals[i] : static_cast<double>(ints[i]); }
  int64_t integer(size_t i) const { return floating() ? static_cast<int64_t>(reals[i]) : ints[i]; }

  // A value of this shape filled from `fill`, converted to `dtype`.
  static TensorValue filled(DType dtype, std::vector<int64_t> dims, double fill);

  onnx::TensorProto to_proto() const;
};

// Element count of `dims`, nullopt on a negative dimension or overflow.
std::optional<uint64_t> element_count(const std::vector<int64_t>& dims);

// Where the tensor's data lives, if anywhere we can read it.
enum class DataState { Inline, Absent, External };
DataState data_state(const onnx::TensorProto& t);

// Checks that the data a tensor carries matches its dims and type; returns a
// description of the mismatch, or nullopt when it is consistent (or absent).
std::optional<std::string> check_tensor_data(const onnx::TensorProto& t);

// The tensor's values, when it carries consistent inline data of a numeric
// type and is no larger than kMaxFoldElements.
std::optional<TensorValue> read_tensor_value(const onnx::TensorProto& t);

}  // namespace gpumem::detail
