#pragma once
// torch.profiler's Chrome trace JSON, read (a row of formats.cpp's table).
#include <string>
#include <string_view>

#include "gpumem/trace/trace.h"

namespace gpumem::trace {

// torch.profiler's Chrome trace JSON ({"traceEvents": [...]} or a bare
// array): "[memory]" instant events (Addr, Bytes (negative on free), Total
// Allocated, Total Reserved, Device Type, Device Id) become alloc and
// free_completed events, "[OutOfMemory]" ones oom events; each takes as its
// tag the innermost "cpu_op" span ("ph":"X") on the same pid and tid that
// encloses its ts, wherever the span sits in the file. CPU memory (Device
// Type 0) is device -1; other device types keep their Device Id. Times
// (microseconds, integer or decimal) become exact nanoseconds; the events
// come out in time order, events at the same time in file order. Damaged
// events are counted by their index: "traceEvents[12]".
Trace read_chrome_trace(std::string_view data, const std::string& name, const ReadOptions& options = {});
// JSON that opens with { or [ and is not a gpumem history.
bool is_chrome_trace(std::string_view head);

}  // namespace gpumem::trace
