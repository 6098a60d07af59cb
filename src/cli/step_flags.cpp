#include "cli/step_flags.h"

#include <map>
#include <vector>

namespace gpumem::cli {
namespace {

const std::map<std::string, train::Optimizer>& optimizers() {
  static const std::map<std::string, train::Optimizer> names = {{"sgd", train::Optimizer::kSgd},
                                                                {"sgd-momentum", train::Optimizer::kSgdMomentum},
                                                                {"adam", train::Optimizer::kAdam},
                                                                {"adamw", train::Optimizer::kAdamW},
                                                                {"adafactor", train::Optimizer::kAdafactor},
                                                                {"adam8bit", train::Optimizer::kAdam8bit}};
  return names;
}

const std::map<std::string, train::Precision>& precisions() {
  static const std::map<std::string, train::Precision> names = {{"fp32", train::Precision::kFp32},
                                                                {"amp-fp16", train::Precision::kAmpFp16},
                                                                {"amp-bf16", train::Precision::kAmpBf16},
                                                                {"bf16", train::Precision::kBf16}};
  return names;
}

template <typename Map>
std::vector<std::string> keys(const Map& map) {
  std::vector<std::string> out;
  for (const auto& [name, value] : map) out.push_back(name);
  return out;
}

}  // namespace

void add_step_flags(CLI::App& cmd, StepFlags& flags, bool precision_auto) {
  cmd.add_option("--optimizer", flags.optimizer,
                 "sgd | sgd-momentum | adam | adamw | adafactor | adam8bit (default adamw)")
      ->check(CLI::IsMember(keys(optimizers())));
  auto precision_names = keys(precisions());
  if (precision_auto) precision_names.push_back("auto");
  cmd.add_option("--precision", flags.precision,
                 std::string("fp32 | amp-fp16 | amp-bf16 | bf16") +
                     (precision_auto ? " | auto (the cheapest that fits)" : "") + " (default fp32)")
      ->check(CLI::IsMember(precision_names));
  cmd.add_option("--device", flags.device, "cuda | cpu: the kernels' own allocations differ (default cuda)")
      ->check(CLI::IsMember({"cuda", "cpu"}));
}

void apply_step_flags(const StepFlags& flags, train::TrainOptions& options) {
  options.optimizer = optimizers().at(flags.optimizer);
  options.precision = flags.precision == "auto" ? train::Precision::kFp32 : precisions().at(flags.precision);
  options.device = flags.device == "cpu" ? train::Device::kCpu : train::Device::kCuda;
}

}  // namespace gpumem::cli
