#pragma once
// The trace formats gpumem reads and writes: one table, a row per format
// (formats.cpp), which read_trace(), `trace convert --to` and replay's
// advice all read. A format's reader and writer live in its own file
// (pytorch_snapshot.h, chrome_trace_reader.h, history_format.h, rmm_log.h,
// minimalloc_csv.h, perfetto_writer.h).
//
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
#include <vector>

#include "gpumem/trace/trace.h"

namespace gpumem::trace {

struct TraceFormat {
  const char* name;         // Trace::format: "pytorch-snapshot"
  const char* description;  // in messages: "a PyTorch snapshot pickle"
  // The allocator policy (alloc/policies/policy_registry.h) whose choices
  // the format's traces record, which replay's advice compares against;
  // "" when none (MiniMalloc CSV holds lifetimes, no allocator).
  const char* recorded_under;
  // Whether a file is of this format, from its first bytes (up to 4 KiB).
  bool (*detect)(std::string_view head);
  Trace (*read)(std::string_view data, const std::string& name, const ReadOptions& options);
  // `trace convert --to` writes it under this name; "" when it is not written.
  const char* written_as;
  // device: whose allocations a per-device format keeps (-2: the busiest);
  // strict: as ReadOptions::strict, for the lifetimes a writer derives.
  void (*write)(const Trace& trace, std::int32_t device, bool strict, std::ostream& out);
};

// Every format, in the order messages list them.
const std::vector<TraceFormat>& trace_formats();
// The names `trace convert --to` takes, in table order.
std::vector<std::string> written_format_names();
// The row of the format named `name` (Trace::format); nullptr for none.
const TraceFormat* format_named(std::string_view name);
// The row whose written_as is `name`; nullptr for none.
const TraceFormat* format_written_as(std::string_view name);

// The format of a file, from its first bytes. Throws InputError naming the
// file when no format matches (or it is a file of another kind gpumem reads).
const TraceFormat& detect_format(std::string_view head, const std::string& file_name);

// The policy a trace's allocator is: what the source says (a gpumem
// history's "allocator", a snapshot whose segments are expandable: the job
// ran with expandable_segments:True), else its format's recorded_under:
// "pytorch" for PyTorch snapshots and profiler traces, "gpumem" for gpumem's
// history, "rmm-pool" for RMM logs; "" for MiniMalloc CSV.
std::string recorded_policy(const Trace& trace);

}  // namespace gpumem::trace
