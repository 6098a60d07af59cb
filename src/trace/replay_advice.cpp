// What replay advises: the policies that would have done better than the
// one the trace was recorded under, and the setting that selects each (from
// the policy table).
#include <algorithm>

#include "gpumem/alloc/policies/policy_registry.h"
#include "gpumem/trace/replay.h"

namespace gpumem::trace {

std::vector<Advice> advise(const ReplayReport& report) {
  std::vector<Advice> advice;
  auto current = std::find_if(report.policies.begin(), report.policies.end(),
                              [&](const PolicyResult& p) { return p.name == report.current_policy; });
  if (current == report.policies.end()) return advice;
  for (const PolicyResult& p : report.policies) {
    // A policy PyTorch cannot run (TensorFlow's BFC) is advice only to a
    // trace recorded under it.
    const alloc::PolicyEntry& entry = alloc::policy_named(p.name);
    if (&p == &*current || !entry.pytorch_can_run || p.oom_at_event) continue;
    const bool fits = current->oom_at_event.has_value();
    Advice a{p.name, entry.setting, p.peak_reserved, fits ? 0 : current->peak_reserved - p.peak_reserved, fits};
    // With --capacity, fitting where the current policy runs out is the
    // saving that matters; otherwise, reserving less at the peak.
    if (a.fits_where_current_does_not || a.saved_bytes > 0) advice.push_back(a);
  }
  // All fit or all save: the least reserved first.
  std::stable_sort(advice.begin(), advice.end(),
                   [](const Advice& a, const Advice& b) { return a.peak_reserved < b.peak_reserved; });
  return advice;
}

}  // namespace gpumem::trace
