// Planning real models' activations, with and without in-place reuse.
#include <gtest/gtest.h>

#include "gpumem/common/error.h"
#include "gpumem/infer/model_plan.h"
#include "gpumem/infer/planner.h"
#include "gpumem/model/onnx_loader.h"
#include "gpumem/plan/validate.h"
#include "model/onnx_builder.h"
#include "test_paths.h"

namespace gpumem::infer {
namespace {

using namespace gpumem::plan;  // the buffers are a planning problem

class ModelPlan : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelPlan, PacksTheBundledModelsAtTheirLowerBound) {
  PlanRequest request;
  request.solve.time_limit_seconds = 5;
  const PlanReport r = plan_file(test::model_path(GetParam()).string(), request);
  EXPECT_FALSE(validate(r.problem, r.result.plan.offsets));
  // Real graphs: the arena is within 2% of the lower bound (in fact equal).
  EXPECT_LE(r.result.plan.arena, r.result.lower_bound + r.result.lower_bound / 50);
  EXPECT_TRUE(r.result.optimal);
  // Against the figures tools/export_models.py computed from the export,
  // not against gpumem's own inspect: no reuse costs every activation's
  // bytes, and without in-place the optimal arena is the most bytes live at
  // one node. In-place only helps.
  const auto want = test::model_expected_figures(GetParam());
  EXPECT_EQ(r.naive_bytes, want["activation_total_bytes"].get<uint64_t>());
  EXPECT_EQ(r.arena_without_in_place, want["activation_peak_live_bytes"].get<int64_t>());
  EXPECT_GT(r.in_place_tensors, 0);
  EXPECT_LE(r.result.plan.arena, r.arena_without_in_place);
}

INSTANTIATE_TEST_SUITE_P(Examples, ModelPlan, ::testing::Values("resnet50", "mobilenet_v2", "bert_base"));

// What an If's branch holds while it runs is planned too: the arena's lower
// bound is inspect's peak, which charges the larger branch at the If.
TEST(ModelPlan, ASubgraphsPeakIsPlannedAtItsNode) {
  const Model m = load_onnx_model_from_bytes(test::if_with_uneven_branches(), "if.onnx");
  const MemoryAnalysis a = analyze_memory(m.graph);
  const ModelBuffers buffers = model_buffers(m.graph, a, /*in_place=*/false);
  ASSERT_EQ(buffers.problem.buffers.back().id, "branch (subgraph)");
  EXPECT_EQ(buffers.problem.buffers.back().size, 2048);
  EXPECT_EQ(lower_bound(buffers.problem), static_cast<int64_t>(a.peak_live_bytes));
  EXPECT_EQ(a.peak_live_bytes, 1u + 1024 + 1024 + 2048);  // cond, x, y and the then-branch
}

// x -> Relu -> y -> Add(y, x2) -> z, x2 read again later: y may take x's
// storage (x dies at the Relu, same size); z may take y's but not x2's.
TEST(InPlace, OnlyDyingInputsOfTheSameSizeAreReused) {
  Graph g;
  auto tensor = [&](const std::string& name, TensorRole role, int producer, int64_t elements) {
    Tensor t;
    t.name = name;
    t.role = role;
    t.producer = producer;
    t.dtype = DType::Float;
    t.dims = std::vector<Dim>{Dim{elements, {}}};
    g.tensors.push_back(t);
    return static_cast<int>(g.tensors.size()) - 1;
  };
  auto node = [&](const std::string& op, std::vector<int> in, int out) {
    Node n;
    n.name = op + std::to_string(g.nodes.size());
    n.op_type = op;
    n.inputs = in;
    n.outputs = {out};
    for (int i : in) g.tensors[static_cast<size_t>(i)].last_reader = static_cast<int>(g.nodes.size());
    g.nodes.push_back(std::move(n));
  };
  const int x = tensor("x", TensorRole::GraphInput, -1, 256);
  const int x2 = tensor("x2", TensorRole::GraphInput, -1, 256);
  const int y = tensor("y", TensorRole::NodeOutput, 0, 256);
  node("Relu", {x}, y);
  const int z = tensor("z", TensorRole::NodeOutput, 1, 256);
  node("Add", {y, x2}, z);
  const int w = tensor("w", TensorRole::NodeOutput, 2, 64);
  node("Conv", {z, x2}, w);  // not elementwise: never in place
  g.tensors[static_cast<size_t>(w)].graph_output = true;
  g.inputs = {x, x2};
  g.outputs = {w};

  const MemoryAnalysis a = analyze_memory(g);
  const ModelBuffers with = model_buffers(g, a, true);
  EXPECT_EQ(with.in_place_tensors, 2);         // y over x, z over y
  EXPECT_EQ(with.problem.buffers.size(), 3u);  // {x, y, z}, x2, w
  const ModelBuffers without = model_buffers(g, a, false);
  EXPECT_EQ(without.problem.buffers.size(), 5u);
  EXPECT_EQ(without.in_place_tensors, 0);
  const SolveResult rw = solve(with.problem), ro = solve(without.problem);
  EXPECT_LT(rw.plan.arena, ro.plan.arena);
}

TEST(InPlace, TheAllowedOpsAreElementwiseOrViews) {
  EXPECT_TRUE(allows_in_place("Relu"));
  EXPECT_TRUE(allows_in_place("Add"));
  EXPECT_TRUE(allows_in_place("Reshape"));
  EXPECT_FALSE(allows_in_place("MatMul"));
  EXPECT_FALSE(allows_in_place("Softmax"));
  EXPECT_FALSE(allows_in_place("Transpose"));  // moves elements
  EXPECT_FALSE(allows_in_place("Concat"));
}

}  // namespace
}  // namespace gpumem::infer
