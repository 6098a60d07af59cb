#pragma once
// Any trace written as Chrome/Perfetto JSON for viewing (`trace convert --to perfetto`).
#include <iosfwd>

#include "gpumem/trace/trace.h"

namespace gpumem::trace {

// Chrome/Perfetto JSON: allocated and reserved bytes as counter tracks, one
// span per allocation (from alloc to free) on a track per stream, and the
// trace's own events as instants.
// One process per device. "allocated" counts as trace_stats does (baseline
// included, so its maximum is the peak); "reserved" is the source's Total
// Reserved when it has one, else the sum of segment events. A stream's
// allocations that overlap without nesting go on extra lanes ("stream 0x0
// (2)"), as the format wants each thread's spans nested. Times are the
// trace's (one microsecond per event when some are unknown).
void write_perfetto(const Trace& trace, std::ostream& out);

}  // namespace gpumem::trace
