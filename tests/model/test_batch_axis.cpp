// Which input axis `--batch` binds: a name says it, else the one symbol all
// data inputs share, else the first axis, marked as assumed.
#include <gtest/gtest.h>

#include <string>

#include "gpumem/common/error.h"
#include "gpumem/model/onnx_loader.h"
#include "onnx_builder.h"
#include "test_paths.h"

namespace gpumem {
namespace {

using test::OnnxBuilder;

// [seq, batch] tokens through an Identity: which axis is found, and what
// --batch 5 binds.
std::string tokens(const std::vector<test::D>& dims, const std::vector<test::D>& mask = {}) {
  OnnxBuilder b;
  b.input("tokens", dims);
  if (!mask.empty()) b.input("mask", mask);
  b.node("Identity", {"tokens"}, {"y"});
  b.output("y");
  return b.bytes();
}

TEST(BatchAxis, ADynamicAxisNamedLikeABatchIsTheBatchWhereverItIs) {
  for (const char* name : {"batch", "batch_size", "N", "bs"}) {
    LoadOptions o;
    o.batch = 5;
    const Model m = load_onnx_model_from_bytes(tokens({128, name}), "m.onnx", o);
    EXPECT_EQ(m.batch_axis.symbol, name);
    EXPECT_FALSE(m.batch_axis.assumed);
    EXPECT_EQ(m.batch_axis.value, 5);
    const Tensor& y = m.graph.tensors[static_cast<size_t>(m.graph.outputs.front())];
    ASSERT_TRUE(y.dims.has_value());
    EXPECT_EQ((*y.dims)[0].value, 128) << name;  // the sequence is left alone
    EXPECT_EQ((*y.dims)[1].value, 5) << name;
  }
}

TEST(BatchAxis, TheOneSymbolAllInputsShareThatIsNotASequence) {
  const Model m = load_onnx_model_from_bytes(tokens({"seq_len", "d0"}, {"d0", "seq_len"}), "m.onnx");
  EXPECT_EQ(m.batch_axis.symbol, "d0");
  EXPECT_FALSE(m.batch_axis.assumed);
}

TEST(BatchAxis, AStaticExportIsTheFirstAxisAndSaysSo) {
  LoadOptions o;
  o.batch = 3;
  const Model m = load_onnx_model_from_bytes(tokens({128, 8}), "m.onnx", o);
  EXPECT_TRUE(m.batch_axis.assumed);
  EXPECT_EQ(m.batch_axis.axis, 0);
  EXPECT_EQ(m.batch_axis.value, 3);
  EXPECT_NE(m.batch_axis.describe().find("assumed"), std::string::npos);
}

TEST(BatchAxis, BatchDimChoosesByNameOrIndex) {
  LoadOptions by_index;
  by_index.batch = 3;
  by_index.batch_dim = "1";
  const Model m = load_onnx_model_from_bytes(tokens({128, 8}), "m.onnx", by_index);
  EXPECT_EQ(m.batch_axis.axis, 1);
  EXPECT_FALSE(m.batch_axis.assumed);
  const Tensor& y = m.graph.tensors[static_cast<size_t>(m.graph.outputs.front())];
  EXPECT_EQ((*y.dims)[0].value, 128);
  EXPECT_EQ((*y.dims)[1].value, 3);

  LoadOptions by_name;
  by_name.batch_dim = "tok";
  EXPECT_EQ(load_onnx_model_from_bytes(tokens({"tok", "batch"}), "m.onnx", by_name).batch_axis.symbol, "tok");
}

TEST(BatchAxis, ABatchDimThatNamesNothingListsTheCandidates) {
  LoadOptions o;
  o.batch_dim = "batsh";
  try {
    load_onnx_model_from_bytes(tokens({"seq", "batch"}), "m.onnx", o);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "m.onnx: --batch-dim batsh: no input has a dimension of that name (candidates: 'seq', 'batch', or an "
                 "axis index, 0 to 1)");
  }
  o.batch_dim = "2";
  EXPECT_THROW(load_onnx_model_from_bytes(tokens({"seq", "batch"}), "m.onnx", o), InputError);
}

TEST(BatchAxis, TheBundledModels) {
  const Model mlp = load_onnx_model(test::model_path("token_mlp_dynamic"));
  EXPECT_EQ(mlp.batch_axis.symbol, "batch");
  const Model lm = load_onnx_model(std::string(GPUMEM_SOURCE_DIR) + "/tests/data/train/transformer_adamw_dynamic.onnx");
  EXPECT_EQ(lm.batch_axis.symbol, "batch");
  EXPECT_EQ(lm.batch_axis.value, 0);  // unbound until --batch or --dim
  const Model resnet = load_onnx_model(test::model_path("resnet50"));
  EXPECT_FALSE(resnet.batch_axis.assumed);  // an NCHW image batch
  EXPECT_EQ(resnet.batch_axis.axis, 0);
  EXPECT_EQ(resnet.batch_axis.value, 1);
}

}  // namespace
}  // namespace gpumem
