// What a PyTorch snapshot says beyond its history: the state its segments
// describe, and, at each out-of-memory error, the figures PyTorch's own
// message gives (the request, reserved, allocated, the largest free block).
#include <algorithm>
#include <map>
#include <unordered_map>

#include "gpumem/trace/trace_stats.h"

namespace gpumem::trace {
namespace {

// The largest stretch of [begin, begin + length) ranges not covered by the
// blocks (address, size), sorted by address. Touching ranges join: the
// mapped pieces of an expandable segment are one address range.
std::int64_t largest_gap(std::map<std::uint64_t, std::int64_t> ranges,
                         const std::vector<std::pair<std::uint64_t, std::int64_t>>& blocks) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> merged;  // [begin, end)
  for (auto [begin, length] : ranges) {
    const std::uint64_t end = begin + static_cast<std::uint64_t>(length);
    if (!merged.empty() && merged.back().second == begin)
      merged.back().second = end;
    else
      merged.push_back({begin, end});
  }
  std::int64_t largest = 0;
  auto block = blocks.begin();
  for (auto [begin, end] : merged) {
    while (block != blocks.end() && block->first < begin) ++block;
    std::uint64_t free_from = begin;
    for (; block != blocks.end() && block->first < end; ++block) {
      if (block->first > free_from) largest = std::max(largest, static_cast<std::int64_t>(block->first - free_from));
      free_from = std::max(free_from, block->first + static_cast<std::uint64_t>(block->second));
    }
    if (end > free_from) largest = std::max(largest, static_cast<std::int64_t>(end - free_from));
  }
  return largest;
}

}  // namespace

SegmentState segment_state(const Trace& trace, std::int32_t device) {
  SegmentState s;
  std::unordered_map<std::uint32_t, ContextBytes> by_context;
  for (const SnapshotSegment& seg : trace.segments) {
    if (seg.device != device) continue;
    s.present = true;
    ++s.segments;
    s.reserved += seg.total_size;
    for (const SnapshotBlock& b : seg.blocks) {
      if (b.state == "active_allocated") {
        s.allocated += b.size;
        ContextBytes& c = by_context[b.context];
        ++c.count;
        c.bytes += b.size;
      } else if (b.state == "active_pending_free") {
        s.pending_free += b.size;
      } else {
        s.largest_free_block = std::max(s.largest_free_block, b.size);
      }
    }
  }
  s.live = merge_by_label(trace, by_context, 10);
  return s;
}

std::vector<OomReport> oom_reports(const Trace& trace, const Lifetimes& lifetimes) {
  std::vector<OomReport> out;
  const SegmentState at_snapshot = segment_state(trace, lifetimes.device);
  std::map<std::uint64_t, std::int64_t> ranges;  // live segments (or mapped pieces): address -> bytes
  std::int64_t reserved = 0;
  bool segment_events = false;
  for (std::size_t i = 0; i < trace.events.size() && out.size() < 10; ++i) {
    const Event& e = trace.events[i];
    if (e.device != lifetimes.device) continue;
    switch (e.action) {
      case Action::kSegmentAlloc:
      case Action::kSegmentMap:
        segment_events = true;
        reserved += e.size;
        ranges[e.address] = e.size;
        break;
      case Action::kSegmentFree:
      case Action::kSegmentUnmap:
        segment_events = true;
        reserved -= e.size;
        ranges.erase(e.address);
        break;
      case Action::kOom: {
        OomReport r;
        r.event = i;
        r.time_ns = e.time_ns;
        r.requested = e.size;
        r.device_free = static_cast<std::int64_t>(e.address);  // PyTorch keeps device_free there
        r.label = context_label(trace, e.context);
        r.from_history = segment_events;
        std::vector<std::pair<std::uint64_t, std::int64_t>> live;
        std::int64_t live_bytes = 0;
        for (const Allocation& a : lifetimes.allocations)
          if (a.alloc_event < i && (a.free_event == kNeverFreed || a.free_event > i)) {
            live.push_back({a.address, a.size});
            live_bytes += a.size;
          }
        if (segment_events) {
          std::sort(live.begin(), live.end());
          r.allocated = live_bytes;
          r.reserved = reserved;
          r.largest_free_block = largest_gap(ranges, live);
        } else if (trace.segments.empty()) {
          r.allocated = live_bytes;
          r.reserved_known = false;
        } else {
          r.reserved = at_snapshot.reserved;
          r.allocated = at_snapshot.allocated;
          r.largest_free_block = at_snapshot.largest_free_block;
        }
        out.push_back(r);
        break;
      }
      default: break;
    }
  }
  return out;
}

}  // namespace gpumem::trace
