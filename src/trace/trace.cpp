// The trace model: action names, interned contexts, and read_trace(), which
// reads a file in the format its first bytes tell (formats.h).
#include "gpumem/trace/trace.h"
#include "gpumem/common/flag_names.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/common/files.h"
#include "gpumem/common/gzip.h"
#include "gpumem/common/progress.h"
#include "gpumem/trace/formats.h"

namespace gpumem::trace {
namespace {

constexpr const char* kActionNames[] = {"alloc",        "free_requested", "free_completed", "segment_alloc",
                                        "segment_free", "segment_map",    "segment_unmap",  "oom",
                                        "snapshot"};

// Frames inside these are the framework's, not the user's. Snapshots give
// absolute paths; torch.profiler's Python tracer gives paths relative to
// sys.path ("torch/nn/modules/conv.py"), so packages are named too.
bool is_library_frame(const Frame& f) {
  for (std::string_view part : {"/torch/", "/site-packages/", "/dist-packages/", "/lib/python", "<frozen"})
    if (f.filename.find(part) != std::string::npos) return true;
  for (std::string_view package :
       {"torch/", "torchvision/", "torchaudio/", "transformers/", "accelerate/", "lightning/", "pytorch_lightning/",
        "numpy/", "contextlib.py", "functools.py", "threading.py", "runpy.py"})
    if (f.filename.starts_with(package)) return true;
  return false;
}

std::string key_of(const Context& c) {
  std::string key = c.tag;
  key += '\0';
  for (const Frame& f : c.frames) {
    key += f.filename;
    key += '\x01';
    key += std::to_string(f.line);
    key += '\x01';
    key += f.name;
    key += '\0';
  }
  return key;
}

}  // namespace

const char* action_name(Action action) {
  auto i = static_cast<std::size_t>(action);
  return i < std::size(kActionNames) ? kActionNames[i] : "unknown";
}

bool parse_action(std::string_view name, Action* out) {
  for (std::size_t i = 0; i < std::size(kActionNames); ++i) {
    if (name == kActionNames[i]) {
      if (out) *out = static_cast<Action>(i);
      return true;
    }
  }
  return false;
}

// "name (file:line)"; a frame without a file (torch.profiler's
// "nn.Module: Linear_0" markers) is its name.
std::string frame_text(const Frame& f) {
  return f.filename.empty() ? f.name : fmt::format("{} ({}:{})", f.name, f.filename, f.line);
}

std::string Context::label() const {
  if (!tag.empty()) return tag;
  if (std::string user = user_frame(); !user.empty()) return user;
  if (!frames.empty()) return frame_text(frames.front());
  return "";
}

std::string Context::user_frame() const {
  for (const Frame& f : frames)
    if (!is_library_frame(f)) return frame_text(f);
  return "";
}

std::uint32_t Trace::intern(Context context) {
  if (context.tag.empty() && context.frames.empty()) return 0;
  if (context_index_.empty())
    for (std::uint32_t i = 1; i < contexts.size(); ++i) context_index_.emplace(key_of(contexts[i]), i);
  auto [it, inserted] = context_index_.try_emplace(key_of(context), static_cast<std::uint32_t>(contexts.size()));
  if (inserted) contexts.push_back(std::move(context));
  return it->second;
}

void require_memory_events(const Trace& trace, bool history_needed) {
  const bool any_alloc =
      std::any_of(trace.events.begin(), trace.events.end(), [](const Event& e) { return e.action == Action::kAlloc; });
  if (any_alloc || (!trace.segments.empty() && !history_needed)) return;
  const std::string file = printable(trace.source);
  if (!trace.segments.empty())
    throw InputError(fmt::format(
        "{}: no allocation history to replay: the snapshot was taken without "
        "torch.cuda.memory._record_memory_history(); `gpumem trace stats {}` reports the state of its segments",
        file, file));
  if (trace.written_by == "gpumem-perfetto")
    throw InputError(fmt::format(
        "{}: a Perfetto timeline gpumem wrote for viewing: it keeps no allocation events to read back; read the trace "
        "it was made from (`gpumem trace convert " GPUMEM_FLAG_TO " jsonl` keeps every event)",
        file));
  if (trace.format == "chrome-trace")
    throw InputError(fmt::format(
        "{}: no memory events: torch.profiler records allocations only when asked; record again with "
        "torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], profile_memory=True, "
        "record_shapes=True, with_stack=True) and export_chrome_trace()",
        file));
  if (trace.format == "pytorch-snapshot")
    throw InputError(fmt::format(
        "{}: no allocation history and no segments: call torch.cuda.memory._record_memory_history() before the "
        "code to trace, and torch.cuda.memory._dump_snapshot() while its memory is still allocated",
        file));
  throw InputError(fmt::format("{}: no allocations: the trace records no memory to analyse", file));
}

Trace read_trace(const std::string& path, const ReadOptions& options) {
  const Progress progress("reading " + path, 0);
  bool gzipped = false;
  const std::string data = read_file(path, options.max_bytes, "the most gpumem reads from one trace", &gzipped);
  // A byte or line of the content is not one of the gzip file: say so.
  const std::string name = gzipped ? path + " (decompressed)" : path;
  const std::string_view head = std::string_view(data).substr(0, 4096);
  Trace trace = detect_format(head, name).read(data, name, options);
  trace.source = path;
  if (trace.format == "chrome-trace" && head.find(R"("writer":"gpumem-perfetto")") != std::string_view::npos)
    trace.written_by = "gpumem-perfetto";
  return trace;
}

void write_trace_file(const std::string& path, std::string_view contents) {
  if (path.ends_with(".gz"))
    write_file_atomically(path, gzip::compress(contents));
  else
    write_file_atomically(path, contents);
}

}  // namespace gpumem::trace
