// The table of trace formats (include/gpumem/trace/formats.h): adding a
// format is a row here and a file with its reader (and writer).
#include "gpumem/trace/formats.h"

#include <algorithm>
#include <ostream>

#include <fmt/format.h>

#include "common/file_kind.h"
#include "gpumem/common/error.h"
#include "gpumem/trace/chrome_trace_reader.h"
#include "gpumem/trace/history_format.h"
#include "gpumem/trace/minimalloc_csv.h"
#include "gpumem/trace/perfetto_writer.h"
#include "gpumem/trace/pytorch_snapshot.h"
#include "gpumem/trace/rmm_log.h"

namespace gpumem::trace {

const std::vector<TraceFormat>& trace_formats() {
  static const std::vector<TraceFormat> formats = {
      {"pytorch-snapshot", "a PyTorch snapshot pickle", "pytorch", is_pytorch_snapshot, read_pytorch_snapshot,
       "pytorch", [](const Trace& t, std::int32_t, bool, std::ostream& out) { write_pytorch_snapshot(t, out); }},
      {"chrome-trace", "a Chrome trace JSON", "pytorch", is_chrome_trace, read_chrome_trace, "perfetto",
       [](const Trace& t, std::int32_t, bool, std::ostream& out) { write_perfetto(t, out); }},
      {"gpumem-history", "gpumem history JSON lines", "gpumem", is_history, read_history, "jsonl",
       [](const Trace& t, std::int32_t, bool, std::ostream& out) { write_history(t, out); }},
      {"rmm-log", "an RMM log CSV", "rmm-pool", is_rmm_log, read_rmm_log, "", nullptr},
      {"minimalloc-csv", "a MiniMalloc CSV", "", is_minimalloc_csv, read_minimalloc_csv, "csv", write_minimalloc_csv},
  };
  return formats;
}

std::vector<std::string> written_format_names() {
  std::vector<std::string> names;
  for (const TraceFormat& f : trace_formats())
    if (*f.written_as) names.emplace_back(f.written_as);
  return names;
}

const TraceFormat* format_named(std::string_view name) {
  for (const TraceFormat& f : trace_formats())
    if (name == f.name) return &f;
  return nullptr;
}

const TraceFormat* format_written_as(std::string_view name) {
  for (const TraceFormat& f : trace_formats())
    if (*f.written_as && name == f.written_as) return &f;
  return nullptr;
}

const TraceFormat& detect_format(std::string_view head, const std::string& file_name) {
  if (auto wrong = wrong_kind_error(head, file_name, {FileKind::MemoryTrace, FileKind::PlanCsv}, "a memory trace"))
    throw InputError(*wrong);
  const std::vector<TraceFormat>& formats = trace_formats();
  for (const TraceFormat& f : formats)
    if (f.detect(head)) return f;
  std::string known;
  for (std::size_t i = 0; i < formats.size(); ++i)
    known += (i == 0 ? "" : i + 1 == formats.size() ? " or " : ", ") + std::string(formats[i].description);
  throw InputError(fmt::format("{}: byte 0: not a trace gpumem reads ({})", printable(file_name), known));
}

std::string recorded_policy(const Trace& trace) {
  if (!trace.recorded_under.empty()) return trace.recorded_under;
  const TraceFormat* format = format_named(trace.format);
  return format ? format->recorded_under : "";
}

}  // namespace gpumem::trace
