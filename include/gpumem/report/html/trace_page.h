#pragma once
// The page of a trace (`trace stats --html`, `replay --html`, `report TRACE`).
#include <string>

#include "gpumem/trace/lifetimes.h"
#include "gpumem/trace/replay.h"
#include "gpumem/trace/trace.h"
#include "gpumem/trace/trace_stats.h"

namespace gpumem::report {

// A trace: allocated bytes over time, what stayed, the iterations; with a
// replay (made with ReplayOptions::timeline_columns), each policy's reserved
// bytes and the optimal arena as a picture. `lifetimes`, when given, are
// the trace's on the device reported (else they are extracted again).
std::string trace_html(const trace::Trace& trace, const trace::TraceStats* stats, const trace::ReplayReport* replay,
                       const trace::Lifetimes* lifetimes = nullptr);

}  // namespace gpumem::report
