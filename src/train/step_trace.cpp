#include <algorithm>

#include <fmt/format.h>

#include "gpumem/alloc/policies/policy_registry.h"
#include "gpumem/train/training_step.h"

namespace gpumem::train {

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
  // By time: at each time the op's allocations, then what dies after it.
  std::vector<std::vector<size_t>> allocs(static_cast<size_t>(step.end_time) + 1), frees(allocs.size());
  for (size_t i = 0; i < step.allocations.size(); ++i) {
    const Allocation& a = step.allocations[i];
    allocs[static_cast<size_t>(a.alloc_time)].push_back(i);
    if (a.free_time < step.end_time) frees[static_cast<size_t>(a.free_time)].push_back(i);
  }
  int64_t time_ns = 0;
  int64_t live = 0;
  auto emit = [&](trace::Action action, size_t i) {
    const Allocation& a = step.allocations[i];
    trace::Event e;
    e.action = action;
    e.device = 0;
    e.address = address[i];
    e.size = static_cast<int64_t>(a.bytes);
    e.time_ns = time_ns;
    live += action == trace::Action::kAlloc ? e.size : -e.size;
    e.total_allocated = live;
    if (contexts) e.context = t.intern(trace::Context{fmt::format("{}: {}", to_string(a.phase), a.op), {}});
    t.events.push_back(e);
  };
  for (int time = 0; time < step.end_time; ++time) {
    for (size_t i : frees[static_cast<size_t>(time)]) emit(trace::Action::kFreeCompleted, i);
    for (size_t i : allocs[static_cast<size_t>(time)]) emit(trace::Action::kAlloc, i);
    time_ns += 1000;
  }
  return t;
}

}  // namespace gpumem::train
