#pragma once
// Readers and writers of each trace format. Readers take the whole file's
// bytes (the caller reads or maps it) and never build a document tree: they
// turn records into Events as they go, so a trace needs about its own size
// in memory. Errors are InputError: "FILE: PLACE: PROBLEM" on one line,
// where PLACE is a byte offset, a line, or an event number. Without
// options.strict, a reader that meets a damaged record or a truncated file
// keeps what it read, counts the rest in Trace::skipped_records and explains
// in Trace::warnings.
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

#include "gpumem/trace/trace.h"

namespace gpumem::trace {

// PyTorch memory snapshots (torch.cuda.memory._dump_snapshot(): a pickle,
// protocols 2 to 5): device_traces become events (frames become contexts),
// segments become Trace::segments. gpumem's own pickle reader: it
// understands the opcodes these files use and executes nothing (no GLOBAL,
// REDUCE or BUILD); a pickle that needs them is rejected.
Trace read_pytorch_snapshot(std::string_view data, const std::string& name, const ReadOptions& options = {});
// Writes the subset of the snapshot format that PyTorch's memory_viz reads:
// {"segments": [...], "device_traces": [[...], ...]} with per-event action,
// addr, size, stream, time_us and frames. protocol: 2 or 4.
// Host memory (device -1) is numbered after the GPUs (device 0 in a
// CPU-only trace): the format has no negative devices. The top-level key
// "gpumem_host_devices_from" says where that numbering starts (memory_viz
// ignores it), and read_pytorch_snapshot numbers those devices back.
void write_pytorch_snapshot(const Trace& trace, std::ostream& out, int protocol = 4);

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

// RMM's logging_resource_adaptor CSV: Thread,Time,Action,Pointer,Size,Stream
// (Action "allocate", "free", "allocate failure"; Pointer and Stream in hex,
// with or without "0x"). "free" is free_completed, "allocate failure" oom.
// Time is the time of day, HH:MM:SS.ffffff (a day later past midnight), or
// epoch seconds; time_ns is kUnknown when it is neither. Device 0.
Trace read_rmm_log(std::string_view data, const std::string& name, const ReadOptions& options = {});

// gpumem's allocator history (JSON lines, docs/allocator.md "Statistics, snapshots,
// history"), read and written; keys in any order; tags become contexts and
// are written from Context::label(). For traces from other sources the
// writer adds "device" when it is not 0 and leaves out "time_ns" when the
// time is unknown (the reader takes both); snapshot events are not written.
Trace read_history(std::string_view data, const std::string& name, const ReadOptions& options = {});
void write_history(const Trace& trace, std::ostream& out);

// MiniMalloc CSV (id,lower,upper,size): each buffer is allocated at `lower`
// and freed at `upper` (time_ns), in time order with frees first at equal
// times, tagged with its id, at its offset when the file has one (else at
// (index + 1) << 32).
Trace read_minimalloc_csv(std::string_view data, const std::string& name, const ReadOptions& options = {});

}  // namespace gpumem::trace
