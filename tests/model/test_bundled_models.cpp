// The bundled real models against figures computed independently at export
// time (tools/export_models.py: shapes from torch's exporter, lifetimes
// recounted in Python), and against torch's published parameter counts.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gpumem/model/inspect.h"
#include "test_paths.h"

namespace gpumem {
namespace {

uint64_t initializer_elements(const Graph& g) {
  uint64_t n = 0;
  for (int id : g.initializers) n += g.tensors[static_cast<size_t>(id)].elements().value();
  return n;
}

class BundledModel : public ::testing::TestWithParam<std::string> {};

TEST_P(BundledModel, MatchesTheFiguresComputedAtExport) {
  const auto want = test::model_expected_figures(GetParam());
  const InspectResult r = inspect_model(test::model_path(GetParam()));
  const MemoryAnalysis& m = r.memory;

  EXPECT_EQ(r.model.graph.nodes.size(), want["node_count"].get<size_t>());
  EXPECT_EQ(m.weights.count, want["onnx_weight_tensors"].get<uint64_t>());
  EXPECT_EQ(m.weights.elements, want["onnx_weight_elements"].get<uint64_t>());
  EXPECT_EQ(m.weights.bytes, want["onnx_weight_bytes"].get<uint64_t>());
  EXPECT_EQ(initializer_elements(r.model.graph), want["initializer_elements"].get<uint64_t>());

  EXPECT_EQ(m.activations.size(), want["activation_tensors"].get<size_t>());
  EXPECT_EQ(m.total_activation_bytes, want["activation_total_bytes"].get<uint64_t>());
  EXPECT_EQ(m.peak_live_bytes, want["activation_peak_live_bytes"].get<uint64_t>());
  EXPECT_EQ(m.peak_node, want["activation_peak_node_index"].get<int>());
  EXPECT_EQ(r.model.graph.nodes[static_cast<size_t>(m.peak_node)].name,
            want["activation_peak_node_name"].get<std::string>());

  // Every intermediate tensor got a static shape: nothing is a lower bound.
  EXPECT_TRUE(m.unknown_activations.empty());
  EXPECT_TRUE(m.weights.unknown.empty());
  EXPECT_FALSE(m.lower_bound());

  // What nodes derive from weights, by op, as the exporter's script counted.
  for (const auto& [producer, elements] : want["onnx_weight_elements_by_producer"].items()) {
    if (producer == "initializer" || producer == "Constant") continue;
    ASSERT_TRUE(m.weights.derived_by_op.count(producer)) << producer;
    EXPECT_EQ(m.weights.derived_by_op.at(producer).elements, elements.get<uint64_t>()) << producer;
  }
}

INSTANTIATE_TEST_SUITE_P(Examples, BundledModel, ::testing::Values("resnet50", "mobilenet_v2", "bert_base"));

// torchvision's ResNet-50 has 25,557,032 parameters. The exporter folds each
// BatchNorm into the convolution before it: BN's scale and shift (2C) vanish
// and the convolution gains a bias (C), so the file holds C fewer elements per
// BN. ResNet-50's 53 BNs have 26,560 channels: stem 64; stages of 3, 4, 6 and
// 3 bottlenecks with (w, w, 4w) channels for w = 64, 128, 256, 512, plus one
// 4w downsample BN per stage.
TEST(BundledModel, ResNet50WeightsAreTorchsParametersLessFoldedBatchNorm) {
  uint64_t bn_channels = 64;
  const int blocks[] = {3, 4, 6, 3};
  for (int stage = 0; stage < 4; ++stage) {
    const uint64_t w = uint64_t{64} << stage;
    bn_channels += static_cast<uint64_t>(blocks[stage]) * (w + w + 4 * w) + 4 * w;
  }
  EXPECT_EQ(bn_channels, 26560u);
  const InspectResult r = inspect_model(test::model_path("resnet50"));
  EXPECT_EQ(r.memory.weights.elements, 25557032u - bn_channels);
}

// MobileNetV2 (3,504,872 parameters) has 52 BNs with 17,056 channels; its
// ReLU6 layers add 35 pairs of scalar Clip bounds as Constant nodes.
TEST(BundledModel, MobileNetV2WeightsAreTorchsParametersLessFoldedBatchNorm) {
  const InspectResult r = inspect_model(test::model_path("mobilenet_v2"));
  EXPECT_EQ(r.memory.weights.elements, 3504872u - 17056u + 70u);
}

// BERT-base-like: 12 layers, d=768, FFN 3072, vocab 30522, 128 positions.
// Parameters: embeddings 30522*768 + 128*768 + LayerNorm 2*768, and per layer
// QKV 3*768*768 + 3*768, out-proj 768*768 + 768, FFN 2*768*3072 + 3072 + 768,
// two LayerNorms 4*768.
TEST(BundledModel, BertParametersAreAllStoredAndTransposesAreDerived) {
  const uint64_t d = 768, ffn = 3072;
  const uint64_t per_layer = 3 * d * d + 3 * d + d * d + d + 2 * d * ffn + ffn + d + 4 * d;
  const uint64_t params = 30522 * d + 128 * d + 2 * d + 12 * per_layer;
  EXPECT_EQ(params, 108595200u);
  const InspectResult r = inspect_model(test::model_path("bert_base"));
  EXPECT_EQ(initializer_elements(r.model.graph), params);
  // Each MatMul reads its Linear weight through a Transpose (constant folding
  // was off at export): the packed QKV and both FFN matrices of 12 layers.
  // The attention's output projection is a Gemm with transB, no Transpose.
  const uint64_t transposed = 12 * (3 * d * d + 2 * d * ffn);
  EXPECT_EQ(r.memory.weights.derived_by_op.at("Transpose").elements, transposed);
}

}  // namespace
}  // namespace gpumem
