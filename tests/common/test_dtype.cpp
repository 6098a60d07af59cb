#include <gtest/gtest.h>

#include "gpumem/model/dtype.h"

namespace gpumem {
namespace {

TEST(DType, StorageBytesFollowOnnxElementSizes) {
  EXPECT_EQ(storage_bytes(DType::Float, 10), 40u);
  EXPECT_EQ(storage_bytes(DType::Float16, 10), 20u);
  EXPECT_EQ(storage_bytes(DType::BFloat16, 10), 20u);
  EXPECT_EQ(storage_bytes(DType::Double, 10), 80u);
  EXPECT_EQ(storage_bytes(DType::Int64, 3), 24u);
  EXPECT_EQ(storage_bytes(DType::Bool, 7), 7u);  // one byte per bool, as ONNX stores them
  EXPECT_EQ(storage_bytes(DType::Complex128, 2), 32u);
}

TEST(DType, FourBitTypesPackTwoPerByteRoundedUp) {
  EXPECT_EQ(storage_bytes(DType::Int4, 4), 2u);
  EXPECT_EQ(storage_bytes(DType::Int4, 5), 3u);
  EXPECT_EQ(storage_bytes(DType::UInt4, 1), 1u);
  EXPECT_EQ(storage_bytes(DType::Int4, 0), 0u);
}

TEST(DType, StringsAndUndefinedHaveNoSize) {
  EXPECT_FALSE(storage_bytes(DType::String, 1));
  EXPECT_FALSE(storage_bytes(DType::Undefined, 1));
}

TEST(DType, OverflowIsUnknownNotWrapped) {
  EXPECT_FALSE(storage_bytes(DType::Double, ~uint64_t{0} / 4));
}

TEST(DType, ParsesTheNamesUsersWrite) {
  EXPECT_EQ(parse_dtype("fp16"), DType::Float16);
  EXPECT_EQ(parse_dtype("bf16"), DType::BFloat16);
  EXPECT_EQ(parse_dtype("fp32"), DType::Float);
  EXPECT_EQ(parse_dtype("int8"), DType::Int8);
  EXPECT_FALSE(parse_dtype("fp17"));
  EXPECT_EQ(dtype_name(DType::BFloat16), "bfloat16");
}

TEST(DType, OnlyFloatingTypesAreRepriced) {
  EXPECT_TRUE(is_floating(DType::Float));
  EXPECT_TRUE(is_floating(DType::BFloat16));
  EXPECT_FALSE(is_floating(DType::Int64));
  EXPECT_FALSE(is_floating(DType::Bool));
}

}  // namespace
}  // namespace gpumem
