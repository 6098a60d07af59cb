// The evaluator of shape arithmetic, op by op, plus a randomized differential
// test of Slice (the op PyTorch's chunk exports become) against a plain
// reference.
#include <random>

#include <gtest/gtest.h>

#include "model/constant_folding.h"
#include "model/onnx_builder.h"

namespace gpumem::detail {
namespace {

using test::OnnxBuilder;

TensorValue ints(std::vector<int64_t> values, std::vector<int64_t> dims = {}) {
  TensorValue v;
  v.dtype = DType::Int64;
  v.dims = dims.empty() ? std::vector<int64_t>{static_cast<int64_t>(values.size())} : std::move(dims);
  v.ints = std::move(values);
  return v;
}

TensorValue scalar(int64_t x) {
  TensorValue v = ints({x});
  v.dims.clear();
  return v;
}

onnx::NodeProto make_node(const std::string& op, int inputs) {
  onnx::NodeProto n;
  n.set_op_type(op);
  for (int i = 0; i < inputs; ++i) n.add_input("in" + std::to_string(i));
  n.add_output("out");
  return n;
}

std::optional<TensorValue> fold(const onnx::NodeProto& n, const std::vector<const TensorValue*>& values,
                                int64_t opset = 13) {
  FoldInputs in;
  in.values = values;
  in.shapes.resize(values.size());
  auto r = fold_node(n, opset, in);
  if (!r) return std::nullopt;
  return (*r)[0];
}

TEST(ConstantFolding, ShapeNeedsOnlyTheStaticShape) {
  auto n = make_node("Shape", 1);
  FoldInputs in;
  in.values = {nullptr};
  in.shapes = {std::vector<int64_t>{1, 128, 768}};
  auto r = fold_node(n, 13, in);
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)[0].ints, (std::vector<int64_t>{1, 128, 768}));
  // Opset 15's start/end select a range of dimensions.
  OnnxBuilder::int_attr(n, "start", -2);
  r = fold_node(n, 15, in);
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)[0].ints, (std::vector<int64_t>{128, 768}));
  in.shapes = {std::nullopt};
  EXPECT_FALSE(fold_node(n, 15, in));
}

TEST(ConstantFolding, GatherTakesNegativeIndicesAndScalarIndexDropsTheAxis) {
  const auto data = ints({1, 128, 768});
  const auto idx = scalar(-1);
  const auto r = fold(make_node("Gather", 2), {&data, &idx});
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->dims.empty());
  EXPECT_EQ(r->ints, std::vector<int64_t>{768});
  const auto out_of_range = scalar(3);
  EXPECT_FALSE(fold(make_node("Gather", 2), {&data, &out_of_range}));
}

TEST(ConstantFolding, IntegerDivisionTruncatesAndModFollowsTheDivisor) {
  const auto a = ints({7, -7});
  const auto b = ints({2, 2});
  EXPECT_EQ(fold(make_node("Div", 2), {&a, &b})->ints, (std::vector<int64_t>{3, -3}));
  EXPECT_EQ(fold(make_node("Mod", 2), {&a, &b})->ints, (std::vector<int64_t>{1, 1}));
  const auto zero = ints({0, 1});
  EXPECT_FALSE(fold(make_node("Div", 2), {&a, &zero}));  // never a real shape
}

TEST(ConstantFolding, ArithmeticBroadcasts) {
  const auto v = ints({2, 3, 4});
  const auto s = scalar(10);
  EXPECT_EQ(fold(make_node("Mul", 2), {&v, &s})->ints, (std::vector<int64_t>{20, 30, 40}));
  const auto r = fold(make_node("Equal", 2), {&v, &s});
  EXPECT_EQ(r->dtype, DType::Bool);
  EXPECT_EQ(r->ints, (std::vector<int64_t>{0, 0, 0}));
}

TEST(ConstantFolding, UnsqueezeAxesMovedFromAttributeToInputAtOpset13) {
  const auto x = scalar(5);
  const auto axes = ints({0});
  auto r = fold(make_node("Unsqueeze", 2), {&x, &axes}, 13);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->dims, std::vector<int64_t>{1});
  auto old = make_node("Unsqueeze", 1);
  OnnxBuilder::ints_attr(old, "axes", {0, 1});
  r = fold(old, {&x}, 11);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->dims, (std::vector<int64_t>{1, 1}));
}

TEST(ConstantFolding, ConcatAndReshapeWithMinusOneAndZero) {
  const auto a = ints({1});
  const auto b = ints({128, 12, 64});
  auto concat = make_node("Concat", 2);
  OnnxBuilder::int_attr(concat, "axis", 0);
  const auto c = fold(concat, {&a, &b});
  ASSERT_TRUE(c);
  EXPECT_EQ(c->ints, (std::vector<int64_t>{1, 128, 12, 64}));

  const auto data = ints({1, 2, 3, 4, 5, 6}, {2, 3});
  const auto target = ints({0, -1});
  const auto r = fold(make_node("Reshape", 2), {&data, &target});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->dims, (std::vector<int64_t>{2, 3}));
  const auto bad = ints({4, -1});
  EXPECT_FALSE(fold(make_node("Reshape", 2), {&data, &bad}));
}

TEST(ConstantFolding, RangeWhereExpandAndConstantOfShape) {
  const auto start = scalar(0), limit = scalar(10), delta = scalar(3);
  EXPECT_EQ(fold(make_node("Range", 3), {&start, &limit, &delta})->ints, (std::vector<int64_t>{0, 3, 6, 9}));

  TensorValue cond = ints({1, 0, 1});
  cond.dtype = DType::Bool;
  const auto x = ints({1, 2, 3}), y = scalar(-1);
  EXPECT_EQ(fold(make_node("Where", 3), {&cond, &x, &y})->ints, (std::vector<int64_t>{1, -1, 3}));

  const auto shape = ints({2, 3});
  const auto e = fold(make_node("Expand", 2), {&y, &shape});
  EXPECT_EQ(e->dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(e->ints.size(), 6u);

  const auto c = fold(make_node("ConstantOfShape", 1), {&shape});
  ASSERT_TRUE(c);
  EXPECT_EQ(c->dtype, DType::Float);  // the default value is float 0
  EXPECT_EQ(c->reals.size(), 6u);
}

TEST(ConstantFolding, NeverMaterialisesLargeTensors) {
  const auto huge = ints({1, 128, 3072});
  EXPECT_FALSE(fold(make_node("ConstantOfShape", 1), {&huge}));
  const auto start = scalar(0), limit = scalar(int64_t{1} << 40), delta = scalar(1);
  EXPECT_FALSE(fold(make_node("Range", 3), {&start, &limit, &delta}));
  const auto one = scalar(1);
  const auto absurd = ints({int64_t{1} << 40, int64_t{1} << 40});
  EXPECT_FALSE(fold(make_node("Expand", 2), {&one, &absurd}));
}

TEST(ConstantFolding, CastTruncatesTowardZero) {
  TensorValue f;
  f.dtype = DType::Float;
  f.dims = {3};
  f.reals = {2.7, -2.7, 8.0};
  auto n = make_node("Cast", 1);
  OnnxBuilder::int_attr(n, "to", onnx::TensorProto::INT64);
  const auto r = fold(n, {&f});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->ints, (std::vector<int64_t>{2, -2, 8}));
}

// Reference Slice on a 1-D vector, written the slow and obvious way from the
// ONNX specification's clamping rules.
std::vector<int64_t> reference_slice(const std::vector<int64_t>& x, int64_t start, int64_t end, int64_t step) {
  const auto n = static_cast<int64_t>(x.size());
  if (start < 0) start += n;
  if (end < 0) end += n;
  std::vector<int64_t> out;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, n);
    end = std::clamp<int64_t>(end, 0, n);
    for (int64_t i = start; i < end; i += step) out.push_back(x[static_cast<size_t>(i)]);
  } else {
    start = std::clamp<int64_t>(start, -1, n - 1);
    end = std::clamp<int64_t>(end, -1, n - 1);
    for (int64_t i = start; i > end; i += step) out.push_back(x[static_cast<size_t>(i)]);
  }
  return out;
}

TEST(ConstantFolding, SliceAgreesWithAReferenceOnRandomArguments) {
  std::mt19937_64 rng(20261130);
  std::uniform_int_distribution<int64_t> len_dist(0, 9), arg_dist(-12, 12), step_dist(-3, 3);
  const int64_t big = std::numeric_limits<int64_t>::max();  // PyTorch writes INT64_MAX for "to the end"
  for (int iter = 0; iter < 5000; ++iter) {
    const int64_t len = len_dist(rng);
    std::vector<int64_t> data;
    for (int64_t i = 0; i < len; ++i) data.push_back(i * 10);
    int64_t start = arg_dist(rng), end = iter % 7 == 0 ? big : arg_dist(rng), step = step_dist(rng);
    if (step == 0) step = 1;
    const auto x = ints(data, {len});
    const auto s = ints({start}), e = ints({end}), a = ints({0}), st = ints({step});
    const auto r = fold(make_node("Slice", 5), {&x, &s, &e, &a, &st});
    ASSERT_TRUE(r) << start << ":" << end << ":" << step;
    EXPECT_EQ(r->ints, reference_slice(data, start, end, step)) << "len " << len << " " << start << ":" << end << ":"
                                                                 << step;
    EXPECT_EQ(r->dims[0], static_cast<int64_t>(r->ints.size()));
  }
}

}  // namespace
}  // namespace gpumem::detail
