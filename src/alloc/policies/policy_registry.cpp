// The table of allocator policies (include/gpumem/alloc/policies/
// policy_registry.h): one row per policy, read by replay, the training
// commands, advice and the CLI's help.
#include "gpumem/alloc/policies/policy_registry.h"

#include <stdexcept>

#include <fmt/format.h>

#include "gpumem/alloc/caching_allocator.h"
#include "gpumem/alloc/planned_allocator.h"
#include "gpumem/alloc/policies/bfc_allocator.h"
#include "gpumem/alloc/policies/pool_resource.h"
#include "gpumem/common/error.h"

namespace gpumem::alloc {
namespace {

// The caching allocator under a GPUMEM_ALLOC_CONF text: every policy that is
// a setting of gpumem's or PyTorch's allocator is one of these.
template <const char* kConfig>
std::unique_ptr<MemoryResource> caching(SimulatedDevice& device) {
  return std::make_unique<CachingAllocator>(simulated_upstream(device), parse_allocator_config(kConfig));
}
constexpr char kGpumem[] = "";
constexpr char kGpumemExpandable[] = "expandable_segments:true";
constexpr char kPytorch[] = "preset:pytorch";
constexpr char kPytorchExpandable[] = "preset:pytorch,expandable_segments:true";

// TensorFlow's BFC with allow_growth, limited by the device.
std::unique_ptr<MemoryResource> bfc(SimulatedDevice& device) {
  return std::make_unique<BfcAllocator>(device, BfcOptions{});
}

// RMM's pool, growing on demand (current RMM makes the initial size the
// caller's choice; starting empty charges the pool only what it needs).
std::unique_ptr<MemoryResource> rmm_pool(SimulatedDevice& device) {
  return std::make_unique<PoolResource>(device, PoolResourceOptions{});
}

// gpumem's defaults behind a plan of one recorded iteration. The cache
// behind the plan grows expandable ranges: what stays between iterations
// (weights, gradients, optimizer state) then pins granules, not whole
// segments, once the transients move to the arena.
std::unique_ptr<MemoryResource> planned(SimulatedDevice& device) {
  return std::make_unique<PlannedAllocator>(simulated_upstream(device),
                                            parse_allocator_config("expandable_segments:true"));
}
void planned_step(MemoryResource& policy) { static_cast<PlannedAllocator&>(policy).step(); }
PlanCounts planned_counts(const MemoryResource& policy) {
  const auto& stats = static_cast<const PlannedAllocator&>(policy).planned_stats();
  return {stats.planned, stats.missed};
}

}  // namespace

const std::vector<PolicyEntry>& policy_registry() {
  // name, setting, PyTorch can run it, replayed by default, for training steps, training default, make, iteration
  // hook, plan counts.
  static const std::vector<PolicyEntry> table = {
      {"gpumem", "gpumem's allocator in PyTorch (libgpumem_torch.so as a CUDAPluggableAllocator)", true, true, true,
       false, caching<kGpumem>, nullptr, nullptr},
      {"gpumem-expandable", "gpumem's allocator in PyTorch with GPUMEM_ALLOC_CONF=expandable_segments:true", true, true,
       true, false, caching<kGpumemExpandable>, nullptr, nullptr},
      {"pytorch", "PyTorch's defaults: PYTORCH_CUDA_ALLOC_CONF unset", true, true, true, true, caching<kPytorch>,
       nullptr, nullptr},
      {"pytorch-expandable", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", true, true, true, false,
       caching<kPytorchExpandable>, nullptr, nullptr},
      {"bfc", "TensorFlow's BFC allocator (TF_FORCE_GPU_ALLOW_GROWTH=true)", false, true, false, false, bfc, nullptr,
       nullptr},
      {"rmm-pool", "RMM's pool (rmm.allocators.torch.rmm_torch_allocator)", true, true, false, false, rmm_pool, nullptr,
       nullptr},
      {"gpumem-planned",
       "gpumem's allocator in PyTorch with GPUMEM_ALLOC_CONF=planned:true and gpumem_torch_step() at the top of each "
       "iteration",
       true, false, false, false, planned, planned_step, planned_counts},
  };
  return table;
}

const PolicyEntry* find_policy(std::string_view name) {
  for (const PolicyEntry& p : policy_registry())
    if (name == p.name) return &p;
  return nullptr;
}

std::vector<std::string> policy_names(bool PolicyEntry::*which) {
  std::vector<std::string> names;
  for (const PolicyEntry& p : policy_registry())
    if (which == nullptr || p.*which) names.emplace_back(p.name);
  return names;
}

const PolicyEntry& policy_named(std::string_view name, std::string_view flag) {
  if (const PolicyEntry* p = find_policy(name)) return *p;
  std::string known;
  for (const std::string& n : policy_names()) known += (known.empty() ? "" : ", ") + n;
  throw InputError(fmt::format("{}: unknown policy '{}' (known: {})", flag, printable(name), known));
}

const PolicyEntry& training_default_policy() {
  for (const PolicyEntry& p : policy_registry())
    if (p.training_default) return p;
  throw std::logic_error("the policy table marks no training default");
}

}  // namespace gpumem::alloc
