// The 23 steps recorded to check `train` on inputs it was not built
// against (tests/data/train/SPLIT.md: a fixed rule keeps every third one
// out of tuning). Each is predicted with the settings it was recorded
// under (facts "gpumem") and compared with its recorded peak; the tuning
// and held-out halves are reported apart.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "gpumem/train/training_step.h"
#include "recorded_steps.h"

namespace gpumem::train {
namespace {

TrainOptions options_of(const nlohmann::json& g, const std::string& torch_version) {
  static const std::map<std::string, Optimizer> optimizers = {
      {"sgd", Optimizer::kSgd},     {"sgd-momentum", Optimizer::kSgdMomentum}, {"adam", Optimizer::kAdam},
      {"adamw", Optimizer::kAdamW}, {"adafactor", Optimizer::kAdafactor},      {"adam8bit", Optimizer::kAdam8bit}};
  static const std::map<std::string, Precision> precisions = {{"fp32", Precision::kFp32},
                                                              {"amp-fp16", Precision::kAmpFp16},
                                                              {"amp-bf16", Precision::kAmpBf16},
                                                              {"bf16", Precision::kBf16}};
  TrainOptions o;
  o.device = Device::kCpu;
  o.torch = parse_torch_version(torch_version);  // "1.13.0a0": the release that recorded it
  o.optimizer = optimizers.at(g["optimizer"].get<std::string>());
  o.precision = precisions.at(g["precision"].get<std::string>());
  if (!g["foreach"].is_null()) o.foreach = g["foreach"] == "on";
  o.grads_set_to_none = g["grads"] == "set-to-none";
  if (!g["batch"].is_null()) o.model.load.batch = g["batch"].get<int64_t>();
  for (const auto& m : g["checkpoint"]) o.checkpoint.push_back(m.get<std::string>());
  return o;
}

TEST(RecordedMatrix, PredictedPeaksAgainstTheRecordedOnesTuningAndHeldOutApart) {
  std::map<std::string, std::vector<double>> errors;  // split -> |relative error|
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(test::train_data(""))) {
    const std::string file = entry.path().filename().string();
    if (file.rfind("m_", 0) != 0 || file.find(".facts.json") == std::string::npos) continue;
    const std::string name = file.substr(0, file.size() - std::string(".facts.json").size());
    const auto facts = test::recorded_facts(name);
    const TrainingStep step =
        predict_training_step(test::train_data(facts["onnx"]["file"].get<std::string>()),
                              options_of(facts["gpumem"], facts["torch_version"].get<std::string>()));
    const double recorded = facts["recorded_peak_bytes"].get<double>();
    const double error = (static_cast<double>(step.peak_bytes) - recorded) / recorded;
    const std::string split = facts["split"].get<std::string>();
    std::printf("%-26s %-9s recorded %12.0f predicted %12llu  %+.2f%%\n", name.c_str(), split.c_str(), recorded,
                static_cast<unsigned long long>(step.peak_bytes), 100 * error);
    EXPECT_LE(std::abs(error), 0.03) << name;
    errors[split].push_back(std::abs(error));
    ++checked;
  }
  EXPECT_EQ(checked, 23);
  for (auto& [split, e] : errors) {
    std::sort(e.begin(), e.end());
    const double median = e[e.size() / 2];
    std::printf("%s: %zu steps, median |error| %.3f%%, largest %.2f%%\n", split.c_str(), e.size(), 100 * median,
                100 * e.back());
    EXPECT_LT(median, 0.01) << split;
  }
}

}  // namespace
}  // namespace gpumem::train
