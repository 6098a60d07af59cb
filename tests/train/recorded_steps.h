#pragma once
// The training steps tools/record_training.py recorded with torch 1.13 on
// CPU (tests/data/train/), and the settings each was recorded under.
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpumem/train/training_step.h"

namespace gpumem::test {

struct RecordedStep {
  std::string name;
  train::TrainOptions options;
};

inline std::string train_data(const std::string& file) {
  return std::string(GPUMEM_SOURCE_DIR) + "/tests/data/train/" + file;
}

inline nlohmann::json recorded_facts(const std::string& name) {
  std::ifstream in(train_data(name + ".facts.json"));
  return nlohmann::json::parse(in);
}

inline std::vector<RecordedStep> recorded_steps() {
  auto cpu = [](train::Optimizer optimizer) {
    train::TrainOptions o;
    o.optimizer = optimizer;
    o.device = train::Device::kCpu;
    o.torch = train::TorchVersion{1, 13};  // every recording's release
    return o;
  };
  RecordedStep frozen{"resnet18_frozen", cpu(train::Optimizer::kSgdMomentum)};
  frozen.options.frozen = R"(^(conv1|bn1|layer1|layer2)\.)";
  RecordedStep bf16{"transformer_bf16", cpu(train::Optimizer::kAdamW)};
  bf16.options.precision = train::Precision::kAmpBf16;
  return {{"resnet18_sgd", cpu(train::Optimizer::kSgdMomentum)},
          {"mobilenet_v2_sgd", cpu(train::Optimizer::kSgdMomentum)},
          frozen,
          {"transformer_adamw", cpu(train::Optimizer::kAdamW)},
          bf16,
          // Recorded after the rules were written, to check them on models
          // they were not derived from.
          {"resnet50_sgd", cpu(train::Optimizer::kSgdMomentum)},
          {"gpt_adam", cpu(train::Optimizer::kAdam)},
          {"vgg11_bn_sgd", cpu(train::Optimizer::kSgdMomentum)}};
}

}  // namespace gpumem::test
