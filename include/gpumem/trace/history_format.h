#pragma once
// gpumem's own allocator history, read and written (a row of formats.cpp's table).
#include <iosfwd>
#include <string>
#include <string_view>

#include "gpumem/trace/trace.h"

namespace gpumem::trace {

// gpumem's allocator history (JSON lines, docs/allocator.md "Statistics, snapshots,
// history"), read and written; keys in any order; tags become contexts and
// are written from Context::label(). For traces from other sources the
// writer adds "device" when it is not 0 and leaves out "time_ns" when the
// time is unknown (the reader takes both); snapshot events are not written.
Trace read_history(std::string_view data, const std::string& name, const ReadOptions& options = {});
void write_history(const Trace& trace, std::ostream& out);
// A first line that is a JSON object naming "gpumem-history".
bool is_history(std::string_view head);

}  // namespace gpumem::trace
