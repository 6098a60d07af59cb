// Bad input: one InputError whose single line names the file and the
// problem; never a crash or another exception.
#include <fstream>
#include <random>
#include <sstream>

#include <gtest/gtest.h>

#include "gpumem/common/error.h"
#include "gpumem/model/memory_analysis.h"
#include "gpumem/model/onnx_loader.h"
#include "model/onnx_builder.h"
#include "test_paths.h"

namespace gpumem {
namespace {

using test::OnnxBuilder;

// The error message for loading `bytes`, or "" when it loaded.
std::string error_for(const std::string& bytes, const LoadOptions& options = {}) {
  try {
    const Model m = load_onnx_model_from_bytes(bytes, "bad.onnx", options);
    analyze_memory(m.graph);
    return "";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << "not one line: " << what;
    EXPECT_EQ(what.rfind("bad.onnx", 0) == 0 || what.rfind("--", 0) == 0, true) << "does not name the file: " << what;
    return what;
  }
}

void expect_error(const std::string& bytes, const std::string& fragment, const LoadOptions& options = {}) {
  const std::string what = error_for(bytes, options);
  EXPECT_NE(what.find(fragment), std::string::npos) << "got: '" << what << "'";
}

TEST(BadInput, MissingFileAndDirectory) {
  try {
    load_onnx_model("/nonexistent/model.onnx");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/model.onnx: no such file");
  }
  EXPECT_THROW(load_onnx_model(test::source_dir()), InputError);
}

TEST(BadInput, EmptyTextAndRandomBytesAreNotOnnx) {
  expect_error("", "empty file");
  expect_error("This is a README, not a model.\n", "not ");
  expect_error(test::read_file_bytes(test::source_dir() / "CMakeLists.txt"), "not ");
}

TEST(BadInput, TruncatedModelsAreRejectedAtEveryLength) {
  const std::string full = test::read_file_bytes(test::model_path("resnet50"));
  ASSERT_GT(full.size(), 1000u);
  for (size_t len : {size_t{1}, size_t{10}, size_t{100}, full.size() / 3, full.size() / 2, full.size() - 7,
                     full.size() - 1}) {
    const std::string what = error_for(full.substr(0, len));
    EXPECT_FALSE(what.empty()) << "a truncation to " << len << " bytes loaded";
  }
}

TEST(BadInput, CorruptedBytesNeverCrash) {
  const std::string full = test::read_file_bytes(test::model_path("mobilenet_v2"));
  std::mt19937 rng(7);
  int rejected = 0;
  for (int trial = 0; trial < 200; ++trial) {
    std::string bytes = full;
    for (int k = 0; k < 8; ++k) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    rejected += error_for(bytes).empty() ? 0 : 1;  // loads or InputError; anything else fails the test
  }
  EXPECT_GT(rejected, 0);
}

TEST(BadInput, NodesOutOfTopologicalOrder) {
  OnnxBuilder b;
  b.input("x", {4});
  b.node("Relu", {"y"}, {"z"}, "second");
  b.node("Neg", {"x"}, {"y"}, "first");
  b.output("z");
  expect_error(b.bytes(), "bad.onnx: graph: node #0 'second' (Relu) reads 'y', which node #1 produces later: the nodes "
                          "are not in topological order");
}

TEST(BadInput, UndefinedAndTwiceDefinedValues) {
  OnnxBuilder b;
  b.input("x", {4});
  b.node("Relu", {"ghost"}, {"z"});
  b.output("z");
  expect_error(b.bytes(), "reads 'ghost', which no node, graph input or initializer defines");

  OnnxBuilder twice;
  twice.input("x", {4});
  twice.node("Relu", {"x"}, {"y"});
  twice.node("Neg", {"x"}, {"y"});
  twice.output("y");
  expect_error(twice.bytes(), "'y' redefines a value");
}

TEST(BadInput, NegativeAndAbsurdDimensions) {
  OnnxBuilder neg;
  neg.input("x", {1, -3});
  neg.node("Relu", {"x"}, {"y"});
  neg.output("y");
  expect_error(neg.bytes(), "tensor 'x' has a negative dimension at axis 1");

  OnnxBuilder huge;
  huge.input("x", {int64_t{1} << 40, int64_t{1} << 30});
  huge.node("Relu", {"x"}, {"y"});
  huge.output("y");
  expect_error(huge.bytes(), "a dimension is absurd");

  OnnxBuilder w;
  w.input("x", {4});
  w.weight("w", {4, -1});
  w.node("Add", {"x", "w"}, {"y"});
  w.output("y");
  expect_error(w.bytes(), "tensor 'w' has a negative dimension");
}

TEST(BadInput, AbsurdBatchIsCaughtAfterBinding) {
  OnnxBuilder b;
  b.input("x", {"N", 1 << 20, 1 << 20});
  b.node("Relu", {"x"}, {"y"});
  b.output("y");
  LoadOptions o;
  o.dims["N"] = int64_t{1} << 30;
  expect_error(b.bytes(), "absurd", o);
  o.dims["N"] = -1;
  expect_error(b.bytes(), "--dim N=-1: a dimension cannot be negative", o);
}

TEST(BadInput, InitializerDataThatDisagreesWithItsDims) {
  OnnxBuilder b;
  b.input("x", {4});
  auto* t = b.graph().add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(4);
  t->set_raw_data(std::string(12, '\0'));  // 3 floats for 4
  b.node("Add", {"x", "w"}, {"y"});
  b.output("y");
  expect_error(b.bytes(), "initializer 'w' holds 12 bytes of data but its dims and type need 16");
}

TEST(BadInput, DeeplyNestedSubgraphsAreRefusedNotRecursedForever) {
  // Each If nests its then-branch one level deeper.
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(13);
  onnx::GraphProto* g = model.mutable_graph();
  for (int depth = 0; depth < 200; ++depth) {
    auto* n = g->add_node();
    n->set_op_type("If");
    n->add_input("c");
    n->add_output("o" + std::to_string(depth));
    auto* a = n->add_attribute();
    a->set_name("then_branch");
    a->set_type(onnx::AttributeProto::GRAPH);
    g = a->mutable_g();
  }
  const std::string what = error_for(model.SerializeAsString());
  EXPECT_FALSE(what.empty());
}

}  // namespace
}  // namespace gpumem
