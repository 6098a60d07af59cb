// gpumem's defaults against PyTorch's on the comparison workloads (the same
// ones bench/alloc_compare prints): never more reserved memory at peak, and
// clearly less where PyTorch's cache fragments. These are memory figures,
// exact and deterministic, not timings.
#include <algorithm>
#include <cctype>
#include <numeric>
#include <string>

#include <gtest/gtest.h>

#include "alloc_workloads.h"

namespace gpumem::alloc {
namespace {

constexpr std::size_t kCapacity = std::size_t{80} << 30;

const std::vector<bench::Workload>& workloads() {
  static const std::vector<bench::Workload> w = bench::all_workloads(GPUMEM_SOURCE_DIR);
  return w;
}

// One test per workload in bench::all_workloads(), so a workload added there
// is tested without anyone counting again.
std::vector<std::size_t> workload_indices() {
  std::vector<std::size_t> indices(workloads().size());
  std::iota(indices.begin(), indices.end(), std::size_t{0});
  return indices;
}

// "transformer-train-dynamic" -> "transformer_train_dynamic": test names
// take letters, digits and underscores only.
std::string test_name(const ::testing::TestParamInfo<std::size_t>& info) {
  std::string name = workloads()[info.param].name;
  std::replace_if(name.begin(), name.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
  return name;
}

class Policies : public ::testing::TestWithParam<std::size_t> {};

TEST_P(Policies, GpumemNeverReservesMoreThanPytorchNorExpandableMoreThanGpumem) {
  const bench::Workload& w = workloads()[GetParam()];
  auto pytorch = bench::replay(w, AllocatorConfig::pytorch_defaults(), kCapacity);
  auto gpumem = bench::replay(w, AllocatorConfig::gpumem_defaults(), kCapacity);
  auto pytorch_x = bench::replay(w, parse_allocator_config("preset:pytorch,expandable_segments:true"), kCapacity);
  auto gpumem_x = bench::replay(w, parse_allocator_config("expandable_segments:true"), kCapacity);
  for (const auto* r : {&pytorch, &gpumem, &pytorch_x, &gpumem_x}) {
    EXPECT_EQ(r->ooms, 0) << w.name;
    EXPECT_GE(r->peak_reserved, r->peak_allocated) << w.name;
  }
  EXPECT_LE(gpumem.peak_reserved, pytorch.peak_reserved) << w.name;
  EXPECT_LE(gpumem_x.peak_reserved, pytorch_x.peak_reserved) << w.name;
  EXPECT_LE(gpumem_x.peak_reserved, gpumem.peak_reserved) << w.name;
}

INSTANTIATE_TEST_SUITE_P(Workloads, Policies, ::testing::ValuesIn(workload_indices()), test_name);

TEST(Policies, ClearlyBetterWherePytorchFragments) {
  // BERT-base served at batches 4, 16, 8, 12, 2: PyTorch keeps segments cut
  // for one batch size that the next cannot use.
  bench::Workload w = bench::onnx_model(GPUMEM_SOURCE_DIR "/examples/models/bert_base.onnx", {4, 16, 8, 12, 2});
  auto pytorch = bench::replay(w, AllocatorConfig::pytorch_defaults(), kCapacity);
  auto gpumem = bench::replay(w, AllocatorConfig::gpumem_defaults(), kCapacity);
  EXPECT_LT(double(gpumem.peak_reserved), 0.8 * double(pytorch.peak_reserved));
  bench::Workload mixed = bench::mixed_random();
  auto pytorch_x = bench::replay(mixed, parse_allocator_config("preset:pytorch,expandable_segments:true"), kCapacity);
  auto gpumem_x = bench::replay(mixed, parse_allocator_config("expandable_segments:true"), kCapacity);
  EXPECT_LT(double(gpumem_x.peak_reserved), 0.9 * double(pytorch_x.peak_reserved));
}

}  // namespace
}  // namespace gpumem::alloc
