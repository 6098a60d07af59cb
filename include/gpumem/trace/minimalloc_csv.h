#pragma once
// MiniMalloc's CSV as a trace, read and written (a row of formats.cpp's table).
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

#include "gpumem/trace/trace.h"

namespace gpumem::trace {

// MiniMalloc CSV (id,lower,upper,size): each buffer is allocated at `lower`
// and freed at `upper` (time_ns), in time order with frees first at equal
// times, tagged with its id, at its offset when the file has one (else at
// (index + 1) << 32).
Trace read_minimalloc_csv(std::string_view data, const std::string& name, const ReadOptions& options = {});
// The allocations of one device (-2: the busiest) as MiniMalloc CSV, for
// the planner: each allocation's lifetime in event indices and its size.
void write_minimalloc_csv(const Trace& trace, std::int32_t device, bool strict, std::ostream& out);
// A header line that names "lower" and "upper".
bool is_minimalloc_csv(std::string_view head);

}  // namespace gpumem::trace
