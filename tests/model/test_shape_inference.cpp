// Shape inference: folding of shape arithmetic, symbolic dimensions,
// subgraphs and ops nobody knows.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <onnx/shape_inference/implementation.h>

#include "gpumem/common/error.h"
#include "gpumem/model/memory_analysis.h"
#include "gpumem/model/onnx_loader.h"
#include "model/onnx_builder.h"
#include "test_paths.h"

namespace gpumem {
namespace {

using test::OnnxBuilder;

const Tensor& tensor(const Model& m, const std::string& name) {
  const int id = m.graph.find(name);
  EXPECT_GE(id, 0) << name;
  return m.graph.tensors.at(static_cast<size_t>(id));
}

// ONNX 1.12's InferShapes stops at the packed-QKV chunk of a PyTorch export:
// the Slice ends are computed by Shape -> Gather -> Add -> Div arithmetic it
// does not evaluate. This test pins that down, so the next one means something.
TEST(ShapeInference, OnnxAloneLeavesBertSlicesUnshaped) {
  onnx::ModelProto proto;
  ASSERT_TRUE(proto.ParseFromString(test::read_file_bytes(test::model_path("bert_base"))));
  // Graph-only initializers carry no data; declare them as typed inputs, as
  // our loader effectively does.
  onnx::shape_inference::InferShapes(proto, onnx::OpSchemaRegistry::Instance(),
                                     onnx::ShapeInferenceOptions(false, 0, true));
  std::map<std::string, const onnx::ValueInfoProto*> info;
  for (const auto& vi : proto.graph().value_info()) info[vi.name()] = &vi;
  int unshaped_slices = 0;
  for (const auto& node : proto.graph().node()) {
    if (node.op_type() != "Slice") continue;
    const auto it = info.find(node.output(0));
    bool static_shape = it != info.end() && it->second->type().tensor_type().has_shape();
    if (static_shape) {
      for (const auto& d : it->second->type().tensor_type().shape().dim()) static_shape &= d.has_dim_value();
    }
    unshaped_slices += static_shape ? 0 : 1;
  }
  EXPECT_GT(unshaped_slices, 0);
}

TEST(ShapeInference, EveryBertTensorGetsAStaticShape) {
  const Model m = load_onnx_model(test::model_path("bert_base"));
  int slices = 0;
  for (const auto& node : m.graph.nodes) {
    for (int id : node.outputs) {
      const Tensor& t = m.graph.tensors[static_cast<size_t>(id)];
      EXPECT_TRUE(t.elements()) << node.name << " -> " << t.name << " " << t.shape_string();
    }
    slices += node.op_type == "Slice";
  }
  EXPECT_EQ(slices, 37);  // 12 layers x Q, K, V chunks, plus the position table
  EXPECT_GT(m.notes.folded_nodes, 100);
  EXPECT_TRUE(m.notes.failed_nodes.empty());
  EXPECT_TRUE(m.notes.unknown_ops.empty());
  // The QKV chunk of layer 0: [128, 1, 768] each.
  EXPECT_EQ(tensor(m, "/encoder/layers.0/self_attn/Slice_output_0").shape_string(), "[128,1,768]");
}

TEST(ShapeInference, BatchBindsTheFirstDimensionOfEveryInput) {
  LoadOptions o;
  o.batch = 4;
  const Model m = load_onnx_model(test::model_path("bert_base"), o);
  EXPECT_EQ(tensor(m, "input_ids").shape_string(), "[4,128]");
  EXPECT_EQ(tensor(m, "last_hidden_state").shape_string(), "[4,128,768]");
  const MemoryAnalysis a = analyze_memory(m.graph);
  EXPECT_FALSE(a.lower_bound());
  // Float activations scale with the batch; the peak is made of them alone.
  const MemoryAnalysis one = analyze_memory(load_onnx_model(test::model_path("bert_base")).graph);
  EXPECT_EQ(a.peak_live_bytes, 4 * one.peak_live_bytes);
}

OnnxBuilder symbolic_model() {
  OnnxBuilder b;
  b.input("x", {"N", 16});
  b.weight("w", {16, 32});
  b.node("MatMul", {"x", "w"}, {"y"});
  b.node("Relu", {"y"}, {"z"});
  b.output("z");
  return b;
}

TEST(ShapeInference, UnboundSymbolsLeaveSizesUnknownAndNamed) {
  const Model m = load_onnx_model_from_bytes(symbolic_model().bytes(), "sym.onnx");
  EXPECT_EQ(m.notes.unbound_dims, std::vector<std::string>{"N"});
  EXPECT_EQ(tensor(m, "z").shape_string(), "[N,32]");
  const MemoryAnalysis a = analyze_memory(m.graph);
  EXPECT_TRUE(a.lower_bound());
  EXPECT_EQ(a.unknown_activations.size(), 3u);  // x, y, z: never taken as zero
  EXPECT_EQ(a.weights.bytes, 16u * 32 * 4);
}

TEST(ShapeInference, DimBindsASymbolEverywhere) {
  LoadOptions o;
  o.dims["N"] = 8;
  const Model m = load_onnx_model_from_bytes(symbolic_model().bytes(), "sym.onnx", o);
  EXPECT_TRUE(m.notes.unbound_dims.empty());
  const MemoryAnalysis a = analyze_memory(m.graph);
  EXPECT_FALSE(a.lower_bound());
  EXPECT_EQ(a.total_activation_bytes, 8u * 16 * 4 + 2 * 8u * 32 * 4);
}

TEST(ShapeInference, DimWithAnUnknownNameIsAnError) {
  LoadOptions o;
  o.dims["batch"] = 8;
  try {
    load_onnx_model_from_bytes(symbolic_model().bytes(), "sym.onnx", o);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no dimension named 'batch'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("N"), std::string::npos) << e.what();
  }
}

// Reshape's target comes from Shape -> Gather -> Unsqueeze -> Concat: only
// folding makes its output static.
TEST(ShapeInference, FoldsShapeArithmeticIntoReshapeTargets) {
  OnnxBuilder b;
  b.input("x", {2, 3, 4});
  b.node("Shape", {"x"}, {"s"});
  b.constant_ints("i0", {0});
  b.node("Gather", {"s", "i0"}, {"n"});
  b.constant_ints("minus1", {-1});
  OnnxBuilder::int_attr(b.node("Concat", {"n", "minus1"}, {"target"}), "axis", 0);
  b.node("Reshape", {"x", "target"}, {"y"});
  b.output("y");
  const Model m = load_onnx_model_from_bytes(b.bytes(), "fold.onnx");
  EXPECT_EQ(tensor(m, "y").shape_string(), "[2,12]");
  EXPECT_EQ(m.notes.folded_nodes, 3);  // Shape, Gather, Concat
}

TEST(ShapeInference, UnknownOpsAreReportedAndTheirOutputsUnknown) {
  OnnxBuilder b;
  b.input("x", {1, 8});
  auto& n = b.node("FancyAttention", {"x"}, {"y"});
  n.set_domain("com.example");
  auto* op = b.model().add_opset_import();
  op->set_domain("com.example");
  op->set_version(1);
  b.node("Relu", {"y"}, {"z"});
  b.output("z");
  const Model m = load_onnx_model_from_bytes(b.bytes(), "custom.onnx");
  EXPECT_EQ(m.notes.unknown_ops, std::vector<std::string>{"com.example::FancyAttention"});
  const MemoryAnalysis a = analyze_memory(m.graph);
  EXPECT_TRUE(a.lower_bound());
  EXPECT_EQ(a.unknown_activations.size(), 2u);  // y and z
  EXPECT_EQ(a.total_activation_bytes, 32u);     // x alone is known
}

// An If whose branches need different memory is charged its larger branch
// at the If node.
TEST(ShapeInference, IfIsChargedItsLargerBranch) {
  const Model m = load_onnx_model_from_bytes(gpumem::test::if_with_uneven_branches(), "if.onnx");
  const auto& if_node = m.graph.nodes[0];
  ASSERT_EQ(if_node.subgraphs.size(), 2u);
  // x is read inside the branches: it must live until the If runs.
  EXPECT_EQ(if_node.implicit_inputs.size(), 1u);
  const MemoryAnalysis a = analyze_memory(m.graph);
  ASSERT_EQ(a.subgraph_charges.size(), 1u);
  // then-branch: t1 live [0,1], t2 live [1,1] -> peak 2 x 1 KiB; else: 1 KiB.
  EXPECT_EQ(a.subgraph_charges[0].bytes, 2048u);
  EXPECT_EQ(a.subgraph_charges[0].subgraphs, 2);
  // At the If: cond (1 B) + x (1 KiB) + y (1 KiB) + the branch's 2 KiB.
  EXPECT_EQ(a.timeline[0].live_bytes, 1u + 1024 + 1024 + 2048);
  EXPECT_EQ(a.peak_node, 0);
}

}  // namespace
}  // namespace gpumem

namespace gpumem {
namespace {

// Four [1, 2^30] tensors concatenated are [1, 2^32]: once [1, 0] and "0 B"
// (ONNX's own Concat inference sums dims in 32 bits); 50,000 x [2^20]
// once summed to 3.31 GiB instead of ~195 GiB (issue 34).
TEST(ShapeInference, ConcatOfLargeDimsDoesNotWrap) {
  OnnxBuilder b;
  for (const char* x : {"a", "b", "c", "d"}) b.input(x, {1, int64_t{1} << 30});
  OnnxBuilder::int_attr(b.node("Concat", {"a", "b", "c", "d"}, {"y"}), "axis", 1);
  b.output("y");
  const Model m = load_onnx_model_from_bytes(b.bytes(), "concat.onnx");
  EXPECT_EQ(tensor(m, "y").shape_string(), "[1,4294967296]");
}

}  // namespace
}  // namespace gpumem
