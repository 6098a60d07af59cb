// One policy over an allocation sequence: see
// include/gpumem/alloc/policies/policy_run.h.
#include "gpumem/alloc/policies/policy_run.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "gpumem/alloc/simulated_device.h"

namespace gpumem::alloc {
namespace {

// "Unlimited": more than any device, small enough that an expandable
// range's per-granule table stays a few MiB.
constexpr std::size_t kUnlimited = std::size_t{2} << 40;

}  // namespace

PolicyRun run_policy(const PolicyEntry& entry, const AllocationSequence& sequence, const PolicyRunOptions& options) {
  PolicyRun r;
  r.name = entry.name;
  const bool timeline = options.timeline_columns > 0;
  if (timeline)
    r.reserved_timeline = Envelope(0, static_cast<std::int64_t>(sequence.positions), options.timeline_columns);
  Progress* progress = options.progress;
  const std::vector<std::size_t> no_starts;
  const std::vector<std::size_t>& starts = options.iteration_starts ? *options.iteration_starts : no_starts;
  auto stream_of = [&](std::uint32_t i) { return sequence.streams.empty() ? kDefaultStream : sequence.streams[i]; };
  std::size_t next_start = 0;
  bool steady = false;
  std::size_t steady_peak = 0;
  const auto start = std::chrono::steady_clock::now();
  SimulatedDevice device({.capacity = options.capacity ? options.capacity : kUnlimited});
  {
    const std::unique_ptr<MemoryResource> policy = entry.make(device);
    std::vector<void*> ptrs(sequence.sizes.size(), nullptr);
    std::int64_t live = 0;
    std::size_t peak = 0;
    std::size_t done = 0;
    for (const AllocationSequence::Step& s : sequence.steps) {
      if (progress && (++done & 4095) == 0) progress->advance(4096);
      const std::size_t bytes = sequence.sizes[s.allocation];
      if (s.free) {
        policy->deallocate(ptrs[s.allocation], bytes, stream_of(s.allocation));
        ptrs[s.allocation] = nullptr;
        live -= static_cast<std::int64_t>(bytes);
        if (steady) steady_peak = std::max(steady_peak, device.physical_used());
        if (timeline)
          r.reserved_timeline.add(static_cast<std::int64_t>(s.position),
                                  static_cast<std::int64_t>(device.physical_used()));
        continue;
      }
      if (next_start < starts.size() && s.allocation == starts[next_start]) {
        if (entry.iteration_begins) entry.iteration_begins(*policy);
        steady = steady || next_start >= 1;
        ++next_start;
      }
      try {
        ptrs[s.allocation] = policy->allocate(bytes, stream_of(s.allocation));
      } catch (const OutOfMemoryError& e) {
        r.oom_at_event = s.position;
        r.oom_message = e.what();
        break;
      }
      live += static_cast<std::int64_t>(bytes);
      // While reservation stays at its peak, the most it held is what
      // counts: a cache reserved early fills up later.
      const std::size_t reserved = device.physical_used();
      if (steady) steady_peak = std::max(steady_peak, reserved);
      if (timeline) r.reserved_timeline.add(static_cast<std::int64_t>(s.position), static_cast<std::int64_t>(reserved));
      if (reserved > peak) {
        peak = reserved;
        r.allocated_at_peak = live;
      } else if (reserved == peak && live > r.allocated_at_peak) {
        r.allocated_at_peak = live;
      }
    }
    r.peak_reserved = static_cast<std::int64_t>(peak);
    if (starts.size() >= 2) r.steady_peak_reserved = static_cast<std::int64_t>(steady_peak);
    if (entry.plan_counts) r.plan = entry.plan_counts(*policy);
    r.fragmentation_at_peak = peak ? 1.0 - double(r.allocated_at_peak) / double(peak) : 0.0;
    // Frees left for the policy's destructor are not the sequence's: count
    // the calls made while running it.
    r.upstream_calls = device.counters().upstream_calls();
    for (std::uint32_t i = 0; i < ptrs.size(); ++i)
      if (ptrs[i]) policy->deallocate(ptrs[i], sequence.sizes[i], stream_of(i));
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace gpumem::alloc
