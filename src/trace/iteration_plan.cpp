#include "gpumem/trace/iteration_plan.h"

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/trace/trace_stats.h"

namespace gpumem::trace {

TracePlan plan_last_iteration(const Lifetimes& lifetimes, const std::string& source, double solve_seconds) {
  const IterationSplit split = find_iterations(lifetimes);
  if (split.starts.empty()) {
    throw InputError(
        fmt::format("{}: no repeating iterations found (`gpumem trace stats` shows what the trace holds); "
                    "planned mode needs a trace of two iterations or more",
                    source));
  }
  const std::size_t first = split.starts.back();
  const std::size_t end = split.end;
  // The iteration ends where the next allocation after it happens (or with
  // the trace): what is freed later outlives it.
  const std::size_t end_event =
      end < lifetimes.allocations.size() ? lifetimes.allocations[end].alloc_event : kNeverFreed;
  std::vector<std::size_t> sizes;
  std::vector<std::int64_t> born, died;
  for (std::size_t i = first; i < end; ++i) {
    const Allocation& a = lifetimes.allocations[i];
    sizes.push_back(static_cast<std::size_t>(std::max<std::int64_t>(a.size, 1)));
    born.push_back(static_cast<std::int64_t>(a.alloc_event));
    died.push_back(a.free_event != kNeverFreed && a.free_event < end_event ? static_cast<std::int64_t>(a.free_event)
                                                                           : -1);
  }
  TracePlan out;
  out.plan = alloc::plan_iteration(sizes, born, died, solve_seconds);
  out.iterations = split.starts.size();
  out.iteration = split.starts.size() - 1;
  for (std::int64_t o : out.plan.offsets) out.planned_requests += o >= 0;
  return out;
}

}  // namespace gpumem::trace
