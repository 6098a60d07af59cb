// Any export a user makes: the recorded models exported again at every
// opset torch 1.13 writes (9 to 17), with and without constant folding,
// static and with a dynamic batch axis (tools/export_opset_matrix.py),
// predict the recorded step as the recorded export does.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

#include "gpumem/train/training_step.h"
#include "recorded_steps.h"

namespace gpumem::train {
namespace {

TEST(ExportMatrix, EveryOpsetFoldingAndAxisPredictsTheRecordedStep) {
  const std::filesystem::path dir = test::train_data("exports");
  std::set<std::string> opsets_seen;
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    if (entry.path().extension() != ".onnx") continue;
    const std::string name = file.substr(0, file.find('.'));  // "resnet18_sgd.o13.fold.dynamic.onnx"
    const std::string opset = file.substr(name.size() + 1, file.find('.', name.size() + 1) - name.size() - 1);
    TrainOptions options;
    bool known = false;
    for (const auto& r : test::recorded_steps()) {
      if (r.name == name) {
        options = r.options;
        known = true;
      }
    }
    ASSERT_TRUE(known) << file;
    const auto facts = test::recorded_facts(name);
    if (file.find(".dynamic.") != std::string::npos) options.model.load.batch = facts["config"]["batch"].get<int64_t>();
    const TrainingStep step = predict_training_step(entry.path().string(), options);
    const TrainingStep recorded_export = predict_training_step(test::train_data(name + ".onnx"), [&] {
      TrainOptions o = options;
      o.model.load.batch.reset();
      return o;
    }());
    const double recorded = facts["recorded_peak_bytes"].get<double>();
    // The same step as the recorded export, and so within its 3% of PyTorch.
    EXPECT_NEAR(static_cast<double>(step.peak_bytes), static_cast<double>(recorded_export.peak_bytes), 0.005 * recorded)
        << file;
    EXPECT_NEAR(static_cast<double>(step.peak_bytes), recorded, 0.03 * recorded) << file;
    EXPECT_TRUE(step.warnings.empty()) << file << ": " << step.warnings.front();
    // A static [seq, batch] export names no batch axis: only assumed there.
    if (!step.batch_axis.assumed) EXPECT_EQ(step.batch_axis.value, facts["config"]["batch"].get<int64_t>()) << file;
    opsets_seen.insert(opset);
    ++files;
  }
  EXPECT_GE(files, 40);
  EXPECT_EQ(opsets_seen.size(), 9u);  // o9 ... o17
}

}  // namespace
}  // namespace gpumem::train
