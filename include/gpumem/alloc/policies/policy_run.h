#pragma once
// One allocator policy over a sequence of allocations and frees, on a fresh
// simulated GPU: what it reserved at its peak, where it ran out. A trace's
// lifetimes (`gpumem replay`) and a predicted training step (`train`, `fit`)
// become such a sequence, so both are answered by this one loop.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpumem/alloc/memory_resource.h"
#include "gpumem/alloc/policies/policy_registry.h"
#include "gpumem/common/envelope.h"
#include "gpumem/common/progress.h"

namespace gpumem::alloc {

// The allocations and frees, in order. An allocation is allocated at most
// once and freed at most once, after it was allocated; one never freed is
// live at the end.
struct AllocationSequence {
  std::vector<std::size_t> sizes;  // bytes, per allocation
  std::vector<StreamId> streams;   // per allocation; empty: every one on the default stream
  struct Step {
    std::uint32_t allocation;  // index into sizes
    bool free;
    std::uint64_t position;  // where it happens (a trace's event index): the timeline's x, where a policy ran out
  };
  std::vector<Step> steps;
  std::uint64_t positions = 0;  // the x axis's end: a trace's event count
};

struct PolicyRunOptions {
  std::size_t capacity = 0;          // device bytes; 0: unlimited
  std::size_t timeline_columns = 0;  // over 0: keep reserved bytes over the positions
  Progress* progress = nullptr;      // advanced as steps are run
  // Allocation indices where iterations begin (ascending; empty: the
  // sequence does not repeat). A policy that learns the loop is told as each
  // begins; the steady peak is taken from the second on.
  const std::vector<std::size_t>* iteration_starts = nullptr;
};

struct PolicyRun {
  std::string name;
  std::int64_t peak_reserved = 0;  // the most the device handed the policy
  // The most bytes live while reservation stood at its peak.
  std::int64_t allocated_at_peak = 0;
  // 1 - allocated_at_peak / peak_reserved: the share of the peak
  // reservation that never held anything.
  double fragmentation_at_peak = 0;
  std::uint64_t upstream_calls = 0;         // device allocate/free/map/unmap calls
  std::optional<std::size_t> oom_at_event;  // the position of the first allocation it could not serve
  std::string oom_message;
  double seconds = 0;  // time the run took
  // With timeline_columns: reserved bytes over the positions, as the lowest
  // and highest of each column.
  Envelope reserved_timeline;
  // With two iterations or more: the most reserved from the second
  // iteration's first allocation on; -1 otherwise.
  std::int64_t steady_peak_reserved = -1;
  // A policy that learns the loop (PolicyEntry::plan_counts): what its plan
  // served and missed.
  std::optional<PlanCounts> plan;
};

PolicyRun run_policy(const PolicyEntry& policy, const AllocationSequence& sequence,
                     const PolicyRunOptions& options = {});

}  // namespace gpumem::alloc
