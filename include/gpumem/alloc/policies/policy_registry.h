#pragma once
// Every allocator policy gpumem can run on the simulated GPU, in one table
// (policy_registry.cpp): `replay` runs them over a trace, `train`, `fit`
// and `finetune` over a predicted step (--allocator), advice names the
// setting that selects each, and the CLI's help lists them from here.
// Adding a policy is a row in that table and, for a new allocator, the file
// that implements it (as bfc_allocator.cpp and pool_resource.cpp do).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gpumem/alloc/memory_resource.h"
#include "gpumem/alloc/simulated_device.h"

namespace gpumem::alloc {

// What a policy that plans its iterations served from its plan, and what
// its plan missed (the cache served them).
struct PlanCounts {
  std::uint64_t planned = 0;
  std::uint64_t missed = 0;
};

struct PolicyEntry {
  const char* name;  // as --policy and --allocator take it: "pytorch-expandable"
  // How a user selects it where the job runs:
  // "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True".
  const char* setting;
  // PyTorch can run it (its own settings, gpumem's allocator plugin, RMM's
  // torch allocator); advice offers one it cannot (TensorFlow's BFC) only
  // for a trace recorded under that very policy.
  bool pytorch_can_run;
  // `replay` runs it when no --policy is given (gpumem-planned is asked for
  // by name: it needs a trace that repeats).
  bool replayed_by_default;
  // `train`, `fit` and `finetune --allocator` take it: a caching allocator
  // a PyTorch training job can run under.
  bool for_training_steps;
  // The one a predicted training step gets without --allocator: the
  // allocator users run (PyTorch's, as it ships).
  bool training_default;
  // A fresh instance over the simulated GPU.
  std::unique_ptr<MemoryResource> (*make)(SimulatedDevice& device);
  // For a policy that learns the loop: told as each iteration after the
  // first begins, and asked at the end what its plan served. nullptr for
  // the others.
  void (*iteration_begins)(MemoryResource& policy);
  PlanCounts (*plan_counts)(const MemoryResource& policy);
};

// Every policy, in the order reports list them.
const std::vector<PolicyEntry>& policy_registry();
// The entry named `name`; nullptr when there is none.
const PolicyEntry* find_policy(std::string_view name);
// The entry named `name`, or InputError "FLAG: unknown policy 'NAME' (known:
// gpumem, ...)".
const PolicyEntry& policy_named(std::string_view name, std::string_view flag = "--policy");
// Names of the entries for which `which` is true, in table order.
std::vector<std::string> policy_names(bool PolicyEntry::*which = nullptr);
// The entry PolicyEntry::training_default marks.
const PolicyEntry& training_default_policy();

}  // namespace gpumem::alloc
