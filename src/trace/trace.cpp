// The trace model: action names, interned contexts, format detection and the
// read_trace() dispatcher.
#include "gpumem/trace/trace.h"

#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/trace/formats.h"

namespace gpumem::trace {
namespace {

constexpr const char* kActionNames[] = {"alloc",        "free_requested", "free_completed",
                                        "segment_alloc", "segment_free",   "segment_map",
                                        "segment_unmap", "oom",            "snapshot"};

// Frames inside these are the framework's, not the user's.
bool is_library_frame(const Frame& f) {
  for (std::string_view part : {"/torch/", "/site-packages/", "/dist-packages/", "/lib/python", "<frozen"})
    if (f.filename.find(part) != std::string::npos) return true;
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

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open the file", printable(path)));
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw InputError(fmt::format("{}: read error", printable(path)));
  return data;
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

std::string Context::label() const {
  if (!tag.empty()) return tag;
  for (const Frame& f : frames)
    if (!is_library_frame(f)) return fmt::format("{} ({}:{})", f.name, f.filename, f.line);
  if (!frames.empty()) return fmt::format("{} ({}:{})", frames.front().name, frames.front().filename, frames.front().line);
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

Format detect_format(std::string_view head, const std::string& file_name) {
  if (!head.empty() && static_cast<unsigned char>(head[0]) == 0x80) return Format::kPytorchSnapshot;
  std::size_t i = head.find_first_not_of(" \t\r\n");
  std::string_view body = i == std::string_view::npos ? std::string_view() : head.substr(i);
  // A history's header line names its format; key order varies by writer.
  std::string_view header = body.substr(0, body.find('\n'));
  if (body.starts_with("{") && header.find("\"gpumem-history\"") != std::string_view::npos) return Format::kHistory;
  if (body.starts_with("{") || body.starts_with("[")) return Format::kChromeTrace;
  if (body.starts_with("Thread,Time,Action")) return Format::kRmmLog;
  std::string_view first_line = body.substr(0, body.find('\n'));
  if (first_line.find("lower") != std::string_view::npos && first_line.find("upper") != std::string_view::npos)
    return Format::kMinimallocCsv;
  throw InputError(fmt::format(
      "{}: byte 0: not a trace gpumem reads (a PyTorch snapshot pickle, a Chrome trace JSON, gpumem history "
      "JSON lines, an RMM log CSV or a MiniMalloc CSV)",
      printable(file_name)));
}

Trace read_trace(const std::string& path, const ReadOptions& options) {
  std::string data = read_file(path);
  switch (detect_format(std::string_view(data).substr(0, 256), path)) {
    case Format::kPytorchSnapshot: return read_pytorch_snapshot(data, path, options);
    case Format::kChromeTrace: return read_chrome_trace(data, path, options);
    case Format::kRmmLog: return read_rmm_log(data, path, options);
    case Format::kHistory: return read_history(data, path, options);
    case Format::kMinimallocCsv: return read_minimalloc_csv(data, path, options);
  }
  throw InputError(fmt::format("{}: unknown format", printable(path)));
}

}  // namespace gpumem::trace
