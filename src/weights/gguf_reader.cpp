// GGUF reader: header, key-values and tensor infos, each value checked
// against the file before it is used (a count is bounded by the bytes left
// before anything is allocated for it), then every tensor's data placed
// inside the file, aligned and apart from the others. Data pages are never
// read.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpumem/common/error.h"
#include "gpumem/common/mapped_file.h"
#include "gpumem/weights/gguf.h"
#include "weights/gguf_layout.h"

namespace gpumem::weights {
namespace {

using gguf_layout::align_up;
using gguf_layout::kDefaultAlignment;

constexpr uint32_t kMaxDims = 4;     // GGML_MAX_DIMS
constexpr size_t kShortArray = 8;    // arrays up to this long are printed in full
constexpr size_t kShortString = 32;  // ... when their strings are this short
// The least a key-value (key length, type, a 1-byte value) and a tensor
// info (name length, n_dims, type, offset) can take: bounds the counts.
constexpr uint64_t kMinKeyValueBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;

std::string_view type_name(GgufType t) {
  switch (t) {
    case GgufType::kUint8: return "uint8";
    case GgufType::kInt8: return "int8";
    case GgufType::kUint16: return "uint16";
    case GgufType::kInt16: return "int16";
    case GgufType::kUint32: return "uint32";
    case GgufType::kInt32: return "int32";
    case GgufType::kFloat32: return "float32";
    case GgufType::kBool: return "bool";
    case GgufType::kString: return "string";
    case GgufType::kArray: return "array";
    case GgufType::kUint64: return "uint64";
    case GgufType::kInt64: return "int64";
    case GgufType::kFloat64: return "float64";
  }
  return "?";
}

// Little-endian reads at a position, each checked against the end.
class Cursor {
 public:
  Cursor(std::string_view bytes, const std::string& path) : bytes_(bytes), path_(path) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return bytes_.size() - pos_; }

  [[noreturn]] void fail_at(uint64_t at, std::string_view problem) const {
    throw InputError(fmt::format("{}: byte {}: {}", path_, at, problem));
  }

  uint64_t uint(uint64_t n, std::string_view what) {
    if (left() < n) fail_at(pos_, fmt::format("the file ends inside {}", what));
    uint64_t v = 0;
    for (uint64_t i = 0; i < n; ++i) v |= uint64_t{static_cast<unsigned char>(bytes_[pos_ + i])} << (8 * i);
    pos_ += n;
    return v;
  }
  uint32_t u32(std::string_view what) { return static_cast<uint32_t>(uint(4, what)); }
  uint64_t u64(std::string_view what) { return uint(8, what); }

  std::string_view string(std::string_view what) {
    const uint64_t at = pos_;
    const uint64_t n = u64(what);
    if (n > left()) fail_at(at, fmt::format("{} of {} bytes runs past the end of the file", what, n));
    const std::string_view s = bytes_.substr(pos_, n);
    pos_ += n;
    return s;
  }

  void skip(uint64_t n) { pos_ += n; }
  // The next n bytes (n checked against what is left by the caller).
  std::string_view take(uint64_t n) {
    const std::string_view s = bytes_.substr(pos_, n);
    pos_ += n;
    return s;
  }

 private:
  std::string_view bytes_;
  const std::string& path_;
  uint64_t pos_ = 0;
};

float as_float(uint64_t bits) {
  const auto b = static_cast<uint32_t>(bits);
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

double as_double(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

// One scalar as text; `type` is fixed-size.
std::string scalar_text(Cursor& in, GgufType type, uint64_t at) {
  const uint64_t v = in.uint(gguf_scalar_size(type), "a value");
  switch (type) {
    case GgufType::kInt8: return std::to_string(static_cast<int8_t>(v));
    case GgufType::kInt16: return std::to_string(static_cast<int16_t>(v));
    case GgufType::kInt32: return std::to_string(static_cast<int32_t>(v));
    case GgufType::kInt64: return std::to_string(static_cast<int64_t>(v));
    case GgufType::kFloat32: return fmt::format("{}", as_float(v));
    case GgufType::kFloat64: return fmt::format("{}", as_double(v));
    case GgufType::kBool:
      if (v > 1) in.fail_at(at, fmt::format("a bool of value {}", v));
      return v ? "true" : "false";
    default: return std::to_string(v);
  }
}

GgufType value_type(Cursor& in) {
  const uint64_t at = in.pos();
  const uint32_t t = in.u32("a value type");
  if (t > static_cast<uint32_t>(GgufType::kFloat64)) in.fail_at(at, fmt::format("unknown value type {}", t));
  return static_cast<GgufType>(t);
}

std::string array_text(Cursor& in) {
  const GgufType element = value_type(in);
  const uint64_t count_at = in.pos();
  const uint64_t count = in.u64("an array's length");
  if (element == GgufType::kArray) in.fail_at(count_at - 4, "an array of arrays");
  // Strings take at least their 8-byte length.
  const uint64_t least = element == GgufType::kString ? 8 : gguf_scalar_size(element);
  if (count > in.left() / least)
    in.fail_at(count_at,
               fmt::format("an array of {} {} values runs past the end of the file", count, type_name(element)));
  bool short_enough = count <= kShortArray;
  if (!short_enough && element != GgufType::kString && element != GgufType::kBool) {
    in.skip(count * least);  // bounded above; numbers need no look
    return fmt::format("[{} {} values]", count, type_name(element));
  }
  std::vector<std::string> shown;
  for (uint64_t i = 0; i < count; ++i) {
    if (element == GgufType::kString) {
      const std::string_view s = in.string("a string");
      if (short_enough && s.size() <= kShortString)
        shown.push_back('"' + printable(s) + '"');
      else
        short_enough = false;
    } else {
      // A long bool array is still read: each value must be 0 or 1.
      std::string text = scalar_text(in, element, in.pos());
      if (short_enough) shown.push_back(std::move(text));
    }
  }
  if (short_enough) return fmt::format("[{}]", fmt::join(shown, ", "));
  return fmt::format("[{} {}{}]", count, type_name(element), element == GgufType::kString ? "s" : " values");
}

// Reads one value as text; general.alignment's value also comes back.
std::string value_text(Cursor& in, GgufType type, uint64_t at) {
  if (type == GgufType::kString) return std::string(in.string("a string"));
  if (type == GgufType::kArray) return array_text(in);
  return scalar_text(in, type, at);
}

struct Info {
  TensorEntry entry;
  uint64_t relative = 0;
};

}  // namespace

WeightFile parse_gguf(std::string_view bytes, const std::string& path) {
  const std::string where = printable(path);
  Cursor in(bytes, where);
  WeightFile file;
  file.path = path;
  file.format = "gguf";
  file.file_bytes = bytes.size();

  if (bytes.size() < 4 || bytes.substr(0, 4) != "GGUF")
    in.fail_at(0, "not a GGUF file (it does not start with \"GGUF\")");
  in.skip(4);
  const uint32_t version = in.u32("the version");
  if (version == 0x03000000 || version == 0x02000000) in.fail_at(4, "a big-endian GGUF file, which is not supported");
  if (version != 2 && version != 3)
    in.fail_at(4, fmt::format("GGUF version {} is not supported (only 2 and 3)", version));
  const uint64_t tensor_count = in.u64("the tensor count");
  const uint64_t kv_count = in.u64("the key-value count");
  if (kv_count > in.left() / kMinKeyValueBytes)
    in.fail_at(16, fmt::format("{} key-values cannot fit in the file's {} bytes", kv_count, bytes.size()));
  if (tensor_count > in.left() / kMinTensorInfoBytes)
    in.fail_at(8, fmt::format("{} tensors cannot fit in the file's {} bytes", tensor_count, bytes.size()));

  uint64_t alignment = kDefaultAlignment;
  for (uint64_t i = 0; i < kv_count; ++i) {
    const uint64_t key_at = in.pos();
    const std::string key(in.string("a key"));
    const uint64_t type_at = in.pos();
    const GgufType type = value_type(in);
    const uint64_t value_at = in.pos();
    std::string text = value_text(in, type, value_at);
    if (key == "general.alignment") {
      if (type != GgufType::kUint32)
        in.fail_at(type_at, fmt::format("general.alignment is a {}, not a uint32", type_name(type)));
      alignment = std::stoull(text);
      if (alignment == 0 || (alignment & (alignment - 1)) != 0)
        in.fail_at(value_at, fmt::format("general.alignment {} is not a power of two", alignment));
    }
    if (!file.metadata.emplace(key, std::move(text)).second)
      in.fail_at(key_at, fmt::format("key '{}' appears twice", printable(key)));
  }

  std::vector<Info> infos;
  infos.reserve(tensor_count);  // bounded by the file's size above
  std::set<std::string_view> names;
  for (uint64_t i = 0; i < tensor_count; ++i) {
    const uint64_t name_at = in.pos();
    const std::string_view name = in.string("a tensor name");
    if (!names.insert(name).second) in.fail_at(name_at, fmt::format("tensor '{}' appears twice", printable(name)));
    Info info;
    info.entry.name = std::string(name);
    info.entry.file = path;
    const auto tensor_error = [&](std::string_view problem) {
      throw InputError(fmt::format("{}: tensor '{}': {}", where, printable(name), problem));
    };
    const uint32_t n_dims = in.u32("a tensor's dimension count");
    if (n_dims == 0 || n_dims > kMaxDims)
      tensor_error(fmt::format("{} dimensions (1 to {} allowed)", n_dims, kMaxDims));
    for (uint32_t d = 0; d < n_dims; ++d) info.entry.shape.push_back(in.u64("a tensor's dimensions"));
    const uint32_t type = in.u32("a tensor's type");
    info.relative = in.u64("a tensor's offset");
    const GgmlType* t = ggml_type(type);
    if (!t) tensor_error(fmt::format("unknown ggml type {}", type));
    info.entry.dtype = std::string(t->name);
    try {
      info.entry.bytes = ggml_tensor_bytes(type, info.entry.shape);
    } catch (const std::invalid_argument& e) {
      tensor_error(fmt::format("shape [{}]: {}", fmt::join(info.entry.shape, ", "), e.what()));
    }
    if (info.relative % alignment != 0)
      tensor_error(fmt::format("offset {} is not a multiple of the alignment {}", info.relative, alignment));
    infos.push_back(std::move(info));
  }

  const uint64_t data_start = align_up(in.pos(), alignment);
  for (Info& info : infos) {
    const uint64_t room = data_start <= bytes.size() ? bytes.size() - data_start : 0;
    if (info.relative > room || info.entry.bytes > room - info.relative)
      throw InputError(
          fmt::format("{}: tensor '{}': its {} bytes at data offset {} run past the end of the file ({} bytes)", where,
                      printable(info.entry.name), info.entry.bytes, info.relative, bytes.size()));
    info.entry.offset = data_start + info.relative;
  }
  std::vector<const Info*> by_offset;
  by_offset.reserve(infos.size());
  for (const Info& info : infos) by_offset.push_back(&info);
  std::ranges::sort(by_offset, {}, [](const Info* i) { return i->relative; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const Info& a = *by_offset[i - 1];
    const Info& b = *by_offset[i];
    if (a.relative + a.entry.bytes > b.relative)
      throw InputError(fmt::format("{}: tensor '{}': its data overlaps tensor '{}'", where, printable(b.entry.name),
                                   printable(a.entry.name)));
  }
  file.tensors.reserve(infos.size());
  for (Info& info : infos) file.tensors.push_back(std::move(info.entry));
  return file;
}

std::vector<GgufKeyValue> parse_gguf_metadata(std::string_view bytes, const std::string& path) {
  const std::string where = printable(path);
  Cursor in(bytes, where);
  if (bytes.size() < 4 || bytes.substr(0, 4) != "GGUF")
    in.fail_at(0, "not a GGUF file (it does not start with \"GGUF\")");
  in.skip(4);
  const uint32_t version = in.u32("the version");
  if (version != 2 && version != 3)
    in.fail_at(4, fmt::format("GGUF version {} is not supported (only 2 and 3)", version));
  in.u64("the tensor count");
  const uint64_t kv_count = in.u64("the key-value count");
  if (kv_count > in.left() / kMinKeyValueBytes)
    in.fail_at(16, fmt::format("{} key-values cannot fit in the file's {} bytes", kv_count, bytes.size()));
  // A scalar's bits into a GgufValue: integers in `integer`, floats in `real`.
  const auto scalar = [&](GgufType type) {
    GgufValue v;
    v.type = type;
    const uint64_t bits = in.uint(gguf_scalar_size(type), "a value");
    if (type == GgufType::kFloat32)
      v.real = as_float(bits);
    else if (type == GgufType::kFloat64)
      v.real = as_double(bits);
    else
      v.integer = bits;
    return v;
  };
  std::vector<GgufKeyValue> out;
  out.reserve(kv_count);
  std::set<std::string> keys;
  for (uint64_t i = 0; i < kv_count; ++i) {
    const uint64_t key_at = in.pos();
    GgufKeyValue kv;
    kv.key = std::string(in.string("a key"));
    if (!keys.insert(kv.key).second) in.fail_at(key_at, fmt::format("key '{}' appears twice", printable(kv.key)));
    const GgufType type = value_type(in);
    if (type == GgufType::kString) {
      kv.value = GgufValue::string(std::string(in.string("a string")));
    } else if (type == GgufType::kArray) {
      kv.value.type = GgufType::kArray;
      kv.value.element_type = value_type(in);
      const uint64_t count_at = in.pos();
      const uint64_t count = in.u64("an array's length");
      if (kv.value.element_type == GgufType::kArray) in.fail_at(count_at - 4, "an array of arrays");
      const uint64_t least = kv.value.element_type == GgufType::kString ? 8 : gguf_scalar_size(kv.value.element_type);
      if (count > in.left() / least)
        in.fail_at(count_at, fmt::format("an array of {} {} values runs past the end of the file", count,
                                         type_name(kv.value.element_type)));
      if (kv.value.element_type == GgufType::kString) {
        kv.value.elements.reserve(count);
        for (uint64_t j = 0; j < count; ++j)
          kv.value.elements.push_back(GgufValue::string(std::string(in.string("a string"))));
      } else {
        // Numbers stay as the file's bytes: a GgufValue per uint8 made a
        // 24 MB array cost 2 GB (issue 34).
        kv.value.packed = std::string(in.take(count * least));
      }
    } else {
      kv.value = scalar(type);
    }
    out.push_back(std::move(kv));
  }
  return out;
}

WeightFile read_gguf(const std::string& path) {
  const MappedFile mapped(path);
  return parse_gguf(mapped.bytes(), path);
}

uint64_t gguf_scalar_size(GgufType t) {
  switch (t) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool: return 1;
    case GgufType::kUint16:
    case GgufType::kInt16: return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32: return 4;
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64: return 8;
    default: return 0;  // strings and arrays have no fixed size
  }
}

}  // namespace gpumem::weights
