// Accounting semantics on hand-built graphs, plus a randomized differential
// test against a brute-force recount.
#include <random>

#include <gtest/gtest.h>

#include "gpumem/model/memory_analysis.h"

namespace gpumem {
namespace {

// Builds a Graph directly: each call adds a node reading `inputs` and
// producing one float tensor of `elements` elements.
class GraphBuilder {
 public:
  int input(const std::string& name, int64_t elements, DType dtype = DType::Float) {
    const int id = add(name, TensorRole::GraphInput, -1, elements, dtype);
    g.inputs.push_back(id);
    return id;
  }
  int weight(const std::string& name, int64_t elements, DType dtype = DType::Float) {
    const int id = add(name, TensorRole::Initializer, -1, elements, dtype);
    g.tensors[static_cast<size_t>(id)].weight = true;
    g.initializers.push_back(id);
    return id;
  }
  int node(const std::string& op, std::vector<int> inputs, int64_t elements, DType dtype = DType::Float) {
    const int index = static_cast<int>(g.nodes.size());
    Node n;
    n.name = op + "_" + std::to_string(index);
    n.op_type = op;
    n.inputs = inputs;
    bool all_weights = !inputs.empty() || op == "Constant";
    for (int i : inputs) {
      g.tensors[static_cast<size_t>(i)].last_reader = index;
      all_weights = all_weights && g.tensors[static_cast<size_t>(i)].weight;
    }
    const int out = add(n.name + "_out", TensorRole::NodeOutput, index, elements, dtype);
    g.tensors[static_cast<size_t>(out)].weight = all_weights;
    n.outputs = {out};
    g.nodes.push_back(std::move(n));
    return out;
  }
  void output(int id) {
    g.outputs.push_back(id);
    g.tensors[static_cast<size_t>(id)].graph_output = true;
  }
  Graph g;

 private:
  int add(const std::string& name, TensorRole role, int producer, int64_t elements, DType dtype) {
    Tensor t;
    t.name = name;
    t.role = role;
    t.producer = producer;
    t.dtype = dtype;
    if (elements >= 0) t.dims = std::vector<Dim>{Dim{elements, {}}};
    g.tensors.push_back(std::move(t));
    return static_cast<int>(g.tensors.size()) - 1;
  }
};

TEST(MemoryAnalysis, LifetimesFollowTheDocumentedSemantics) {
  GraphBuilder b;
  const int x = b.input("x", 100);          // live [0, 1]
  const int w = b.weight("w", 1000);
  const int a = b.node("MatMul", {x, w}, 10);  // node 0, read by 1 and 2 -> [0, 2]
  const int c = b.node("Relu", {a, x}, 20);    // node 1, read by 3 -> [1, 3]
  b.node("Shape", {a}, 1, DType::Int64);       // node 2, never read -> [2, 2]
  const int y = b.node("Neg", {c}, 30);        // node 3, graph output -> [3, 4]
  b.node("Sigmoid", {y}, 40);                  // node 4, never read -> [4, 4]
  b.output(y);
  const MemoryAnalysis m = analyze_memory(b.g);

  ASSERT_EQ(m.activations.size(), 6u);
  auto range = [&](int tensor) {
    for (const auto& act : m.activations) {
      if (act.tensor == tensor) return std::pair(act.first, act.last);
    }
    return std::pair(-1, -1);
  };
  EXPECT_EQ(range(x), std::pair(0, 1));
  EXPECT_EQ(range(a), std::pair(0, 2));
  EXPECT_EQ(range(c), std::pair(1, 3));
  EXPECT_EQ(range(y), std::pair(3, 4));

  const std::vector<uint64_t> expected = {400 + 40, 400 + 40 + 80, 40 + 80 + 8, 80 + 120, 120 + 160};
  ASSERT_EQ(m.timeline.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(m.timeline[i].live_bytes, expected[i]) << i;
  EXPECT_EQ(m.peak_live_bytes, 520u);
  EXPECT_EQ(m.peak_node, 1);
  EXPECT_EQ(m.total_activation_bytes, 400u + 40 + 80 + 8 + 120 + 160);
  EXPECT_EQ(m.weights.count, 1u);
  EXPECT_EQ(m.weights.bytes, 4000u);
}

TEST(MemoryAnalysis, NodesReadingOnlyWeightsProduceWeights) {
  GraphBuilder b;
  const int x = b.input("x", 4);
  const int w = b.weight("w", 6);
  const int wt = b.node("Transpose", {w}, 6);  // folded once: a weight
  const int k = b.node("Constant", {}, 2, DType::Int64);
  const int y = b.node("MatMul", {x, wt}, 3);
  b.node("Reshape", {y, k}, 3);
  const MemoryAnalysis m = analyze_memory(b.g);
  EXPECT_EQ(m.weights.count, 3u);  // w, its Transpose, the Constant
  EXPECT_EQ(m.weights.elements, 6u + 6 + 2);
  EXPECT_EQ(m.weights.derived.elements, 6u);  // the Constant is stored, not derived
  EXPECT_EQ(m.weights.derived_by_op.at("Transpose").tensors, 1u);
  EXPECT_EQ(m.activations.size(), 3u);  // x, y, the Reshape
}

TEST(MemoryAnalysis, RepricingChangesOnlyFloatingTensors) {
  GraphBuilder b;
  const int x = b.input("x", 1000);
  const int ids = b.input("ids", 10, DType::Int64);
  const int w = b.weight("w", 1000);
  b.node("Add", {x, w, ids}, 1000);
  PricingOptions p;
  p.activations_as = DType::Float16;
  p.weights_as = DType::Int8;
  const MemoryAnalysis m = analyze_memory(b.g, p);
  EXPECT_EQ(m.total_activation_bytes, 2000u + 80 + 2000);
  EXPECT_EQ(m.weights.bytes, 1000u);
  EXPECT_EQ(m.weights.by_dtype.begin()->first, DType::Int8);
}

TEST(MemoryAnalysis, UnknownSizesAreCountedNotTakenAsZero) {
  GraphBuilder b;
  const int x = b.input("x", -1);  // unknown shape
  const int s = b.input("s", 3, DType::String);
  b.node("Relu", {x, s}, 8);
  const MemoryAnalysis m = analyze_memory(b.g);
  EXPECT_EQ(m.unknown_activations.size(), 2u);
  EXPECT_TRUE(m.lower_bound());
  EXPECT_EQ(m.total_activation_bytes, 32u);
}

TEST(MemoryAnalysis, EmptyGraphHasNoPeakNode) {
  GraphBuilder b;
  b.input("x", 4);
  const MemoryAnalysis m = analyze_memory(b.g);
  EXPECT_EQ(m.peak_node, -1);
  EXPECT_TRUE(m.timeline.empty());
  EXPECT_EQ(m.total_activation_bytes, 16u);
}

// Random DAGs: the sweep over a difference array must equal, at every node,
// the plain sum over tensors of "is it live here".
TEST(MemoryAnalysis, TimelineEqualsABruteForceRecountOnRandomGraphs) {
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 300; ++trial) {
    GraphBuilder b;
    std::vector<int> values;
    const int inputs = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < inputs; ++i) values.push_back(b.input("in" + std::to_string(i), 1 + rng() % 1000));
    if (rng() % 2) values.push_back(b.weight("w", 1 + rng() % 1000));
    const int nodes = 1 + static_cast<int>(rng() % 40);
    for (int n = 0; n < nodes; ++n) {
      std::vector<int> ins;
      const int k = 1 + static_cast<int>(rng() % 3);
      for (int j = 0; j < k; ++j) ins.push_back(values[rng() % values.size()]);
      values.push_back(b.node("Op", ins, static_cast<int64_t>(rng() % 5000)));
    }
    for (int j = 0; j < 2; ++j) b.output(values[rng() % values.size()]);

    const MemoryAnalysis m = analyze_memory(b.g);
    const int last = nodes - 1;
    uint64_t best = 0;
    int best_at = -1;
    for (int i = 0; i < nodes; ++i) {
      uint64_t live = 0;
      for (const Tensor& t : b.g.tensors) {
        if (t.weight) continue;
        const int first = t.role == TensorRole::GraphInput ? 0 : t.producer;
        int end = t.last_reader >= 0 ? t.last_reader : first;
        if (t.graph_output) end = last;
        if (first <= i && i <= end) live += *t.elements() * 4;
      }
      ASSERT_EQ(m.timeline[static_cast<size_t>(i)].live_bytes, live) << "trial " << trial << " node " << i;
      if (best_at < 0 || live > best) {
        best = live;
        best_at = i;
      }
    }
    EXPECT_EQ(m.peak_live_bytes, best);
    EXPECT_EQ(m.peak_node, best_at);
  }
}

}  // namespace
}  // namespace gpumem
