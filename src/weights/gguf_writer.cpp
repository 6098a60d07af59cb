// GGUF writer: the byte image llama.cpp's gguf_write produces (header,
// key-values, tensor infos, padding, each tensor's data padded to the
// alignment), whole or with the data left as a hole. Tests and tools use it
// to make files of any shape; the reader checks what it writes.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpumem/common/files.h"
#include "gpumem/weights/gguf.h"
#include "weights/gguf_layout.h"

namespace gpumem::weights {
namespace {

using gguf_layout::align_up;
using gguf_layout::kDefaultAlignment;

void put(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void put_string(std::string& out, const std::string& s) {
  put(out, s.size(), 8);
  out += s;
}

// A value without its type tag (arrays carry their element type inside).
void put_value(std::string& out, const GgufValue& v) {
  switch (v.type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool: put(out, v.integer, 1); break;
    case GgufType::kUint16:
    case GgufType::kInt16: put(out, v.integer, 2); break;
    case GgufType::kUint32:
    case GgufType::kInt32: put(out, v.integer, 4); break;
    case GgufType::kUint64:
    case GgufType::kInt64: put(out, v.integer, 8); break;
    case GgufType::kFloat32: put(out, std::bit_cast<uint32_t>(static_cast<float>(v.real)), 4); break;
    case GgufType::kFloat64: put(out, std::bit_cast<uint64_t>(v.real), 8); break;
    case GgufType::kString: put_string(out, v.text); break;
    case GgufType::kArray:
      put(out, static_cast<uint32_t>(v.element_type), 4);
      if (!v.packed.empty()) {
        const uint64_t size = gguf_scalar_size(v.element_type);
        if (size == 0 || !v.elements.empty() || v.packed.size() % size != 0)
          throw std::invalid_argument("a GGUF array's packed bytes are not whole numbers of its element type");
        put(out, v.packed.size() / size, 8);
        out += v.packed;
        break;
      }
      put(out, v.elements.size(), 8);
      for (const GgufValue& e : v.elements) {
        if (e.type != v.element_type) throw std::invalid_argument("a GGUF array with elements of another type");
        put_value(out, e);
      }
      break;
  }
}

uint64_t alignment_of(const GgufContents& contents) {
  for (const GgufKeyValue& kv : contents.metadata) {
    if (kv.key != "general.alignment") continue;
    if (kv.value.type != GgufType::kUint32) throw std::invalid_argument("general.alignment must be a uint32");
    const uint64_t a = kv.value.integer;
    if (a == 0 || (a & (a - 1)) != 0) throw std::invalid_argument("general.alignment must be a power of two");
    return a;
  }
  return kDefaultAlignment;
}

// Header through the padding before the data; *size gets the whole file's.
std::string head(const GgufContents& contents, uint64_t* size) {
  const uint64_t alignment = alignment_of(contents);
  std::string out = "GGUF";
  put(out, 3, 4);
  put(out, contents.tensors.size(), 8);
  put(out, contents.metadata.size(), 8);
  for (const GgufKeyValue& kv : contents.metadata) {
    put_string(out, kv.key);
    put(out, static_cast<uint32_t>(kv.value.type), 4);
    put_value(out, kv.value);
  }
  uint64_t offset = 0;
  for (const GgufTensor& t : contents.tensors) {
    put_string(out, t.name);
    put(out, t.ne.size(), 4);
    for (const uint64_t n : t.ne) put(out, n, 8);
    put(out, t.type, 4);
    put(out, offset, 8);
    offset = align_up(offset + ggml_tensor_bytes(t.type, t.ne), alignment);
  }
  out.resize(align_up(out.size(), alignment), '\0');
  *size = out.size() + offset;
  return out;
}

GgufValue of_integer(GgufType type, uint64_t v) {
  GgufValue value;
  value.type = type;
  value.integer = v;
  return value;
}

template <typename T>
GgufValue array_of(GgufType element, const std::vector<T>& values, GgufValue (*make)(T)) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.element_type = element;
  v.elements.reserve(values.size());
  for (const T& x : values) v.elements.push_back(make(x));
  return v;
}

}  // namespace

GgufValue GgufValue::string(std::string s) {
  GgufValue v;
  v.type = GgufType::kString;
  v.text = std::move(s);
  return v;
}
GgufValue GgufValue::u32(uint32_t v) { return of_integer(GgufType::kUint32, v); }
GgufValue GgufValue::i32(int32_t v) { return of_integer(GgufType::kInt32, static_cast<uint32_t>(v)); }
GgufValue GgufValue::u64(uint64_t v) { return of_integer(GgufType::kUint64, v); }
GgufValue GgufValue::boolean(bool v) { return of_integer(GgufType::kBool, v ? 1 : 0); }
GgufValue GgufValue::f32(float v) {
  GgufValue value;
  value.type = GgufType::kFloat32;
  value.real = v;
  return value;
}
GgufValue GgufValue::strings(const std::vector<std::string>& values) {
  return array_of<std::string>(GgufType::kString, values, &GgufValue::string);
}
GgufValue GgufValue::i32s(const std::vector<int32_t>& values) {
  return array_of<int32_t>(GgufType::kInt32, values, &GgufValue::i32);
}
GgufValue GgufValue::f32s(const std::vector<float>& values) {
  return array_of<float>(GgufType::kFloat32, values, &GgufValue::f32);
}

std::string write_gguf(const GgufContents& contents) {
  uint64_t size = 0;
  std::string out = head(contents, &size);
  const uint64_t alignment = alignment_of(contents);
  out.reserve(size);
  for (const GgufTensor& t : contents.tensors) {
    if (t.data.size() != ggml_tensor_bytes(t.type, t.ne))
      throw std::invalid_argument("tensor '" + t.name + "' has " + std::to_string(t.data.size()) +
                                  " bytes of data, not the " + std::to_string(ggml_tensor_bytes(t.type, t.ne)) +
                                  " its type and shape take");
    out += t.data;
    out.resize(align_up(out.size(), alignment), '\0');
  }
  return out;
}

void write_gguf_sparse(const std::string& path, const GgufContents& contents) {
  for (const GgufTensor& t : contents.tensors)
    if (!t.data.empty()) throw std::invalid_argument("write_gguf_sparse: tensor '" + t.name + "' has data");
  uint64_t size = 0;
  const std::string header = head(contents, &size);
  write_file_atomically(path, header, size);
}

GgufStreamWriter::GgufStreamWriter(const std::string& path, const GgufContents& layout)
    : out_(path), alignment_(alignment_of(layout)) {
  for (const GgufTensor& t : layout.tensors) {
    if (!t.data.empty())
      throw std::invalid_argument("GgufStreamWriter: tensor '" + t.name + "' has data in the layout");
    expected_.emplace_back(t.name, ggml_tensor_bytes(t.type, t.ne));
  }
  uint64_t size = 0;
  out_.write(head(layout, &size));
}

void GgufStreamWriter::add(std::string_view data) {
  if (next_ >= expected_.size()) throw std::invalid_argument("GgufStreamWriter: more tensors than the layout lists");
  const auto& [name, bytes] = expected_[next_];
  if (data.size() != bytes)
    throw std::invalid_argument("tensor '" + name + "' has " + std::to_string(data.size()) +
                                " bytes of data, not the " + std::to_string(bytes) + " its type and shape take");
  out_.write(data);
  static const std::string zeros(256, '\0');
  uint64_t pad = (alignment_ - out_.written() % alignment_) % alignment_;
  while (pad > 0) {
    const uint64_t n = std::min<uint64_t>(pad, zeros.size());
    out_.write(std::string_view(zeros).substr(0, n));
    pad -= n;
  }
  ++next_;
}

uint64_t GgufStreamWriter::finish() {
  if (next_ != expected_.size())
    throw std::invalid_argument("GgufStreamWriter: " + std::to_string(expected_.size() - next_) +
                                " tensor(s) of the layout got no data");
  const uint64_t size = out_.written();
  out_.commit();
  return size;
}

}  // namespace gpumem::weights
