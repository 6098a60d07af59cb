// `gpumem train` on exports that take apart what PyTorch runs as one kernel
// (tools/record_onnx_rules.py: torch 2.10 on the CPU, the TorchScript
// exporter in training mode; tests/data/onnx_rules). SiLU exports as Sigmoid
// then Mul, Hardswish before opset 14 as HardSigmoid then Mul; PyTorch keeps
// only the activation's input for backward. Issue 47 measured +21% from
// keeping the gate's output as well; each is now within 3% of its recording.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "gpumem/train/training_step.h"
#include "test_paths.h"

namespace gpumem::train {
namespace {

void check(const std::string& name) {
  const auto dir = test::source_dir() / "tests" / "data" / "onnx_rules";
  const auto facts = nlohmann::json::parse(test::read_file_bytes(dir / (name + ".facts.json")));
  TrainOptions o;
  o.device = Device::kCpu;
  o.optimizer = Optimizer::kSgdMomentum;
  o.model.load.batch = 8;
  o.torch = parse_torch_version(facts["torch"].get<std::string>());
  const TrainingStep step = predict_training_step((dir / (name + ".onnx")).string(), o);
  const double recorded = facts["recorded_peak_bytes"].get<double>();
  const double error = static_cast<double>(step.peak_bytes) / recorded - 1;
  std::printf("  %-20s recorded %.0f, predicted %llu, %+.2f%%\n", name.c_str(), recorded,
              static_cast<unsigned long long>(step.peak_bytes), 100 * error);
  EXPECT_LT(std::fabs(error), 0.03) << name;
  EXPECT_TRUE(step.assumptions.empty()) << step.assumptions.front();
}

TEST(OnnxRules, SiluTakenApartIsPricedAsOneKernel) { check("silu_cnn_o14"); }
TEST(OnnxRules, HardswishBeforeOpset14IsPricedAsOneKernel) { check("hardswish_cnn_o13"); }
TEST(OnnxRules, HardswishAsOneNode) { check("hardswish_cnn_o14"); }

TEST(OnnxRules, TheSameModuleExportedEitherWayIsTheSameStep) {
  // One module, two opsets: a graph that takes Hardswish apart and one that
  // does not predict the same step.
  const auto dir = test::source_dir() / "tests" / "data" / "onnx_rules";
  TrainOptions o;
  o.device = Device::kCpu;
  o.optimizer = Optimizer::kSgdMomentum;
  o.model.load.batch = 8;
  const auto o13 = predict_training_step((dir / "hardswish_cnn_o13.onnx").string(), o);
  const auto o14 = predict_training_step((dir / "hardswish_cnn_o14.onnx").string(), o);
  EXPECT_EQ(o13.peak_bytes, o14.peak_bytes);
}

}  // namespace
}  // namespace gpumem::train
