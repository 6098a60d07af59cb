#include "cli/step_flags.h"

#include <map>
#include <sstream>
#include <vector>

#include "cli/output_files.h"
#include "cli/size_flag.h"
#include "gpumem/alloc/policies/policy_registry.h"
#include "gpumem/common/device_defaults.h"
#include "gpumem/common/error.h"
#include "gpumem/common/units.h"
#include "gpumem/trace/history_format.h"
#include "gpumem/train/device_memory.h"

namespace gpumem::cli {
namespace {

const std::map<std::string, train::Optimizer>& optimizers() {
  static const std::map<std::string, train::Optimizer> names = {{"sgd", train::Optimizer::kSgd},
                                                                {"sgd-momentum", train::Optimizer::kSgdMomentum},
                                                                {"adam", train::Optimizer::kAdam},
                                                                {"adamw", train::Optimizer::kAdamW},
                                                                {"adafactor", train::Optimizer::kAdafactor},
                                                                {"adam8bit", train::Optimizer::kAdam8bit},
                                                                // bitsandbytes' AdamW8bit and PagedAdamW8bit keep the
                                                                // same 8-bit states; paged ones stay on the GPU until
                                                                // memory runs short.
                                                                {"adamw8bit", train::Optimizer::kAdam8bit},
                                                                {"paged-adamw8bit", train::Optimizer::kAdam8bit},
                                                                // Their 32-bit AdamW, paged or not: fp32 states.
                                                                {"adamw32bit", train::Optimizer::kAdamW32bit},
                                                                {"paged-adamw", train::Optimizer::kAdamW32bit},
                                                                {"paged-adamw32bit", train::Optimizer::kAdamW32bit}};
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
  cmd.add_option(
         "--optimizer", flags.optimizer,
         "sgd | sgd-momentum | adam | adamw | adafactor | adam8bit | adamw8bit | paged-adamw8bit | adamw32bit | "
         "paged-adamw | paged-adamw32bit (the last six: bitsandbytes' optimizers) (default adamw)")
      ->check(CLI::IsMember(keys(optimizers())));
  auto precision_names = keys(precisions());
  if (precision_auto) precision_names.push_back("auto");
  cmd.add_option("--precision", flags.precision,
                 std::string("fp32 | amp-fp16 | amp-bf16 | bf16") +
                     (precision_auto ? " | auto (the same as fp32: fit may change it unless --keep precision)" : "") +
                     " (default " + flags.precision + ")")
      ->check(CLI::IsMember(precision_names));
  cmd.add_option("--device", flags.device, "cuda | cpu: the kernels' own allocations differ (default cuda)")
      ->check(CLI::IsMember({"cuda", "cpu"}));
  cmd.add_option("--grads", flags.grads, "set-to-none (zero_grad's default) | zero: gradients kept between steps")
      ->check(CLI::IsMember({"set-to-none", "zero"}));
  cmd.add_option("--foreach", flags.foreach,
                 "on | off: the optimizer's multi-tensor implementation (default: on for cuda)")
      ->check(CLI::IsMember({"on", "off"}));
  cmd.add_option("--torch", flags.torch,
                 "The PyTorch release to follow where releases differ, e.g. 1.13 (default: current releases)");
  std::string allocators;
  for (const std::string& name : train::step_allocator_names()) allocators += (allocators.empty() ? "" : " | ") + name;
  cmd.add_option("--allocator", flags.allocator,
                 allocators + ": the caching allocator whose reserved bytes count (default " +
                     alloc::training_default_policy().name + "; none with --device cpu)")
      ->check(CLI::IsMember(train::step_allocator_names()));
  cmd.add_option("--overhead", flags.overhead,
                 "Device memory no allocator sees: CUDA context, cuBLAS/cuDNN workspaces (default " +
                     format_bytes(kDefaultCudaOverheadBytes) + " on cuda, 0 on cpu)")
      ->type_name("SIZE");
}

void apply_step_flags(const StepFlags& flags, train::TrainOptions& options) {
  options.optimizer = optimizers().at(flags.optimizer);
  options.precision = flags.precision == "auto" ? train::Precision::kFp32 : precisions().at(flags.precision);
  options.device = flags.device == "cpu" ? train::Device::kCpu : train::Device::kCuda;
  options.grads_set_to_none = flags.grads == "set-to-none";
  if (!flags.foreach.empty()) options.foreach = flags.foreach == "on";
  if (!flags.torch.empty()) {
    const auto version = train::parse_torch_version(flags.torch);
    if (!version) throw InputError("--torch " + flags.torch + ": give a PyTorch release, 1.13 or later (e.g. 2.4)");
    options.torch = *version;
  }
  options.allocator = flags.allocator;
  if (!flags.overhead.empty()) options.overhead_bytes = parse_memory_flag("--overhead", flags.overhead, true);
  train::step_allocator(options);  // --allocator with --device cpu is refused here, before any work
}

void write_step_trace(const std::string& path, const train::TrainingStep& step) {
  std::ostringstream history;
  trace::write_history(train::step_trace(step), history);
  trace::write_trace_file(path, history.str());
  announce_written(path, "gpumem trace of the step");
}

void add_loss_flag(CLI::App& cmd, std::string& loss) {
  cmd.add_option("--loss", loss, "cross-entropy | mse | none, over the graph's first output (default cross-entropy)")
      ->check(CLI::IsMember({"cross-entropy", "mse", "none"}));
}

train::Loss loss_named(const std::string& name) {
  if (name == "mse") return train::Loss::kMse;
  if (name == "none") return train::Loss::kNone;
  return train::Loss::kCrossEntropy;
}

}  // namespace gpumem::cli
