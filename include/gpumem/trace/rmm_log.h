#pragma once
// RMM's allocation log, read (a row of formats.cpp's table).
#include <string>
#include <string_view>

#include "gpumem/trace/trace.h"

namespace gpumem::trace {

// RMM's logging_resource_adaptor CSV: Thread,Time,Action,Pointer,Size,Stream
// (Action "allocate", "free", "allocate failure"; Pointer and Stream in hex,
// with or without "0x"). "free" is free_completed, "allocate failure" oom.
// Time is the time of day, HH:MM:SS.ffffff (a day later past midnight), or
// epoch seconds; time_ns is kUnknown when it is neither. Device 0.
Trace read_rmm_log(std::string_view data, const std::string& name, const ReadOptions& options = {});
bool is_rmm_log(std::string_view head);  // the header "Thread,Time,Action..."

}  // namespace gpumem::trace
