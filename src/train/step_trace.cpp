#include <algorithm>

#include <fmt/format.h>

#include "gpumem/alloc/policies/policy_registry.h"
#include "gpumem/train/training_step.h"

namespace gpumem::train {

alloc::AllocationSequence step_sequence(const TrainingStep& step) {
  alloc::AllocationSequence seq;
  seq.sizes.reserve(step.allocations.size());
  // By time: at each time what dies after the op before, then the op's own
  // allocations (what outlives the step is never freed).
  std::vector<std::vector<std::uint32_t>> allocs(static_cast<size_t>(step.end_time) + 1), frees(allocs.size());
  for (size_t i = 0; i < step.allocations.size(); ++i) {
    const Allocation& a = step.allocations[i];
    seq.sizes.push_back(static_cast<std::size_t>(a.bytes));
    allocs[static_cast<size_t>(a.alloc_time)].push_back(static_cast<std::uint32_t>(i));
    if (a.free_time < step.end_time) frees[static_cast<size_t>(a.free_time)].push_back(static_cast<std::uint32_t>(i));
  }
  seq.steps.reserve(step.allocations.size() * 2);
  for (int time = 0; time < step.end_time; ++time) {
    const auto at = static_cast<std::uint64_t>(time);
    for (std::uint32_t i : frees[static_cast<size_t>(time)]) seq.steps.push_back({i, true, at});
    for (std::uint32_t i : allocs[static_cast<size_t>(time)]) seq.steps.push_back({i, false, at});
  }
  seq.positions = static_cast<std::uint64_t>(std::max(step.end_time, 0));
  return seq;
}

trace::Trace step_trace(const TrainingStep& step, bool contexts) {
  trace::Trace t;
  t.format = "gpumem-history";
  t.source = step.model + " (predicted training step)";
  // The step is predicted for this allocator (PyTorch's unless --allocator said).
  t.recorded_under = step.options.allocator.empty() ? alloc::training_default_policy().name : step.options.allocator;
  // Addresses: each allocation its own, 512-byte aligned, never reused, so
  // that a replay sees only sizes and order.
  std::vector<uint64_t> address(step.allocations.size());
  uint64_t next = 1 << 20;
  for (size_t i = 0; i < step.allocations.size(); ++i) {
    address[i] = next;
    next += (std::max<uint64_t>(step.allocations[i].bytes, 1) + 511) / 512 * 512;
  }
  int64_t live = 0;
  for (const alloc::AllocationSequence::Step& s : step_sequence(step).steps) {
    const Allocation& a = step.allocations[s.allocation];
    trace::Event e;
    e.action = s.free ? trace::Action::kFreeCompleted : trace::Action::kAlloc;
    e.device = 0;
    e.address = address[s.allocation];
    e.size = static_cast<int64_t>(a.bytes);
    e.time_ns = static_cast<int64_t>(s.position) * 1000;  // a microsecond per step time
    live += s.free ? -e.size : e.size;
    e.total_allocated = live;
    if (contexts) e.context = t.intern(trace::Context{fmt::format("{}: {}", to_string(a.phase), a.op), {}});
    t.events.push_back(e);
  }
  return t;
}

}  // namespace gpumem::train
