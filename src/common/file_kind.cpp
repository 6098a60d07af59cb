#include "common/file_kind.h"

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/common/gzip.h"

namespace gpumem {

LikelyKind likely_kind(std::string_view head) {
  if (head.empty()) return LikelyKind::Unknown;
  // Traces: gzip (torch.profiler's .json.gz), a pickle (PyTorch snapshots
  // start with protocol 2+'s 0x80), JSON, or RMM's CSV header.
  if (gzip::has_magic(head) || static_cast<unsigned char>(head[0]) == 0x80) return LikelyKind::MemoryTrace;
  const size_t text = head.find_first_not_of(" \t\r\n");
  if (text != std::string_view::npos && (head[text] == '{' || head[text] == '[')) return LikelyKind::MemoryTrace;
  if (head.starts_with("Thread,Time,Action")) return LikelyKind::MemoryTrace;
  // An ONNX ModelProto opens with its ir_version: field 1, a varint (tag
  // byte 0x08), a small number, then another field's tag.
  if (head.size() >= 3 && head[0] == 0x08 && static_cast<unsigned char>(head[1]) < 0x80) return LikelyKind::OnnxModel;
  return LikelyKind::Unknown;
}

std::optional<std::string> other_kind_advice(std::string_view head, LikelyKind expected, const std::string& file) {
  const LikelyKind kind = likely_kind(head);
  if (kind == expected) return std::nullopt;
  const std::string shown = printable(file);
  switch (kind) {
    case LikelyKind::MemoryTrace:
      return fmt::format("it looks like a memory trace; read it with `gpumem trace stats {0}` or `gpumem replay {0}`",
                         shown);
    case LikelyKind::OnnxModel:
      return fmt::format("it looks like an ONNX model; read it with `gpumem inspect {0}` or `gpumem plan {0}`", shown);
    case LikelyKind::Unknown:
      break;
  }
  return std::nullopt;
}

}  // namespace gpumem
