#include "common/file_kind.h"
#include "gpumem/common/flag_names.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/common/files.h"
#include "gpumem/common/gzip.h"

namespace gpumem {
namespace {

// One row per kind: what it is called, and the commands that read it.
struct KindInfo {
  FileKind kind;
  std::string_view name;
  std::string_view readers;
};

constexpr std::array<KindInfo, 11> kKinds{{
    {FileKind::OnnxModel, "an ONNX model", "`gpumem inspect`, `gpumem plan` or `gpumem train`"},
    {FileKind::MemoryTrace, "a memory trace", "`gpumem trace stats` or `gpumem replay`"},
    {FileKind::Gguf, "a GGUF model", "`gpumem llm` or `gpumem weights`"},
    {FileKind::Safetensors, "a safetensors weights file",
     "`gpumem weights`, or `gpumem llm` on its folder (with its config.json)"},
    {FileKind::SafetensorsIndex, "a safetensors index", "`gpumem weights`, or `gpumem llm` on its folder"},
    {FileKind::ModelConfig, "a model's config.json", "`gpumem llm` or `gpumem serve-sim`"},
    {FileKind::ModelFolder, "a model folder", "`gpumem llm` or `gpumem weights`"},
    {FileKind::PlanCsv, "a MiniMalloc CSV of buffers", "`gpumem plan`"},
    {FileKind::RequestTrace, "a request trace", "`gpumem serve-sim " GPUMEM_FLAG_REQUESTS "`"},
    {FileKind::OomMessage, "an out-of-memory message", "`gpumem explain-oom`"},
    {FileKind::TracedStep, "a traced training step", "`gpumem train`"},
}};

const KindInfo* info(FileKind kind) {
  const auto it = std::find_if(kKinds.begin(), kKinds.end(), [kind](const KindInfo& k) { return k.kind == kind; });
  return it == kKinds.end() ? nullptr : &*it;
}

bool mentions(std::string_view head, std::string_view key) { return head.find(key) != std::string_view::npos; }

// JSON files gpumem reads, told apart by the keys near their top.
FileKind json_kind(std::string_view head) {
  if (mentions(head, "\"gpumem-step\"")) return FileKind::TracedStep;
  if (mentions(head, "\"weight_map\"")) return FileKind::SafetensorsIndex;
  if (mentions(head, "\"arrival_s\"")) return FileKind::RequestTrace;
  if (mentions(head, "\"traceEvents\"") || mentions(head, "\"gpumem-history\"") ||
      mentions(head, "\"schemaVersion\"") || mentions(head, "\"segments\"") || mentions(head, "\"device_traces\""))
    return FileKind::MemoryTrace;
  if (mentions(head, "\"model_type\"") || mentions(head, "\"architectures\"") ||
      mentions(head, "\"num_hidden_layers\"") || mentions(head, "\"hidden_size\""))
    return FileKind::ModelConfig;
  return FileKind::MemoryTrace;  // Chrome traces may open with anything
}

// The kind of what the first compressed bytes inflate to; a damaged or
// cut stream still gives what came out before the damage.
FileKind gzip_kind(std::string_view head) {
  std::string inner;
  try {
    gzip::Inflater inflater("", 1 << 20, "enough to tell the kind");
    inflater.feed(head, inner);
  } catch (const std::exception&) {
  }
  if (inner.empty() || gzip::has_magic(inner)) return FileKind::Unknown;
  return file_kind(std::string_view(inner).substr(0, 4096));
}

}  // namespace

FileKind file_kind(std::string_view head) {
  if (head.empty()) return FileKind::Unknown;
  const auto byte = [&](size_t i) { return i < head.size() ? static_cast<unsigned char>(head[i]) : 0u; };
  if (head.starts_with("GGUF")) return FileKind::Gguf;
  // safetensors: an 8-byte little-endian header length, then its JSON.
  if (head.size() > 9 && head[8] == '{' && byte(7) == 0 && byte(6) == 0) return FileKind::Safetensors;
  // gzip: whatever it holds (a trace, a CSV of buffers or of requests).
  if (gzip::has_magic(head)) return gzip_kind(head);
  // A pickle: PyTorch snapshots start with protocol 2+'s 0x80.
  if (byte(0) == 0x80) return FileKind::MemoryTrace;
  const size_t text = head.find_first_not_of(" \t\r\n");
  if (text != std::string_view::npos && (head[text] == '{' || head[text] == '[')) return json_kind(head.substr(text));
  const std::string_view first_line = head.substr(0, head.find('\n'));
  if (first_line.starts_with("Thread,Time,Action")) return FileKind::MemoryTrace;
  if (first_line.starts_with("arrival_s,")) return FileKind::RequestTrace;
  if (mentions(first_line, "lower") && mentions(first_line, "upper") && mentions(first_line, "size"))
    return FileKind::PlanCsv;
  // An ONNX ModelProto opens with its ir_version: field 1, a varint (tag
  // byte 0x08), a small number, then another field's tag.
  if (head.size() >= 3 && byte(0) == 0x08 && byte(1) < 0x80) return FileKind::OnnxModel;
  // A log or a copied traceback: last, as any text may quote one.
  if (mentions(head, "out of memory") || mentions(head, "OutOfMemoryError")) return FileKind::OomMessage;
  return FileKind::Unknown;
}

FileKind file_kind_at(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return std::filesystem::exists(std::filesystem::path(path) / "config.json", ec) ? FileKind::ModelFolder
                                                                                    : FileKind::Unknown;
  // Not a regular file (a FIFO would block): unknown here; its reader says why.
  int fd = -1;
  try {
    fd = open_regular_file(path);
  } catch (const InputError&) {
    return FileKind::Unknown;
  }
  std::string head(4096, '\0');
  const ssize_t n = ::pread(fd, head.data(), head.size(), 0);
  ::close(fd);
  head.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return file_kind(head);
}

std::optional<std::string> wrong_kind_error(FileKind kind, const std::string& path,
                                            std::initializer_list<FileKind> accepted, std::string_view wanted) {
  if (kind == FileKind::Unknown || std::find(accepted.begin(), accepted.end(), kind) != accepted.end())
    return std::nullopt;
  const KindInfo* k = info(kind);
  return fmt::format("{}: {}, not {}: read it with {}", printable(path), k->name, wanted, k->readers);
}

std::optional<std::string> wrong_kind_error(const std::string& path, std::initializer_list<FileKind> accepted,
                                            std::string_view wanted) {
  return wrong_kind_error(file_kind_at(path), path, accepted, wanted);
}

std::optional<std::string> wrong_kind_error(std::string_view head, const std::string& path,
                                            std::initializer_list<FileKind> accepted, std::string_view wanted) {
  return wrong_kind_error(file_kind(head), path, accepted, wanted);
}

}  // namespace gpumem
