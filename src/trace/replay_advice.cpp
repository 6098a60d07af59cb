// What replay advises: the policies that would have done better than the
// one the trace was recorded under, and the setting that selects each.
#include <algorithm>

#include "gpumem/trace/replay.h"

namespace gpumem::trace {

const char* policy_setting(const std::string& policy) {
  if (policy == "pytorch") return "PyTorch's defaults: PYTORCH_CUDA_ALLOC_CONF unset";
  if (policy == "pytorch-expandable") return "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True";
  if (policy == "gpumem") return "gpumem's allocator in PyTorch (libgpumem_torch.so as a CUDAPluggableAllocator)";
  if (policy == "gpumem-expandable")
    return "gpumem's allocator in PyTorch with GPUMEM_ALLOC_CONF=expandable_segments:true";
  if (policy == "gpumem-planned")
    return "gpumem's allocator in PyTorch with GPUMEM_ALLOC_CONF=planned:true and gpumem_torch_step() at the top of "
           "each iteration";
  if (policy == "rmm-pool") return "RMM's pool (rmm.allocators.torch.rmm_torch_allocator)";
  if (policy == "bfc") return "TensorFlow's BFC allocator (TF_FORCE_GPU_ALLOW_GROWTH=true)";
  return "";
}

std::string recorded_policy(const Trace& trace) {
  // What allocated the memory in each source: snapshots and profiler traces
  // come from PyTorch's caching allocator, histories from gpumem's, logs
  // from RMM's pool. A snapshot's segments tell expandable segments apart;
  // a profiler trace does not say.
  if (!trace.recorded_under.empty()) return trace.recorded_under;
  const std::string& format = trace.format;
  if (format == "pytorch-snapshot") {
    const bool expandable = std::any_of(trace.segments.begin(), trace.segments.end(),
                                        [](const SnapshotSegment& s) { return s.expandable; });
    return expandable ? "pytorch-expandable" : "pytorch";
  }
  if (format == "chrome-trace") return "pytorch";
  if (format == "gpumem-history") return "gpumem";
  if (format == "rmm-log") return "rmm-pool";
  return "";  // MiniMalloc CSV: lifetimes, no allocator
}

std::vector<Advice> advise(const ReplayReport& report) {
  std::vector<Advice> advice;
  auto current = std::find_if(report.policies.begin(), report.policies.end(),
                              [&](const PolicyResult& p) { return p.name == report.current_policy; });
  if (current == report.policies.end()) return advice;
  for (const PolicyResult& p : report.policies) {
    // BFC is TensorFlow's: no setting selects it in PyTorch.
    if (&p == &*current || (p.name == "bfc" && current->name != "bfc") || p.oom_at_event) continue;
    const bool fits = current->oom_at_event.has_value();
    Advice a{p.name, policy_setting(p.name), p.peak_reserved, fits ? 0 : current->peak_reserved - p.peak_reserved,
             fits};
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
