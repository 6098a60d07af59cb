#pragma once
// GGUF (llama.cpp's weight file, versions 3 and 2): reading its header,
// key-values and tensor table into a WeightFile without touching the data
// pages, and writing GGUF files, whole or with the tensor data left as holes
// (a sparse file: a Llama-3-8B-shaped model that costs no disk).
//
// Layout, all little-endian: "GGUF", uint32 version, uint64 tensor_count,
// uint64 kv_count, the key-values (string key, uint32 value type, value),
// the tensor infos (string name, uint32 n_dims, n_dims x uint64 ne, uint32
// ggml type, uint64 offset from the start of the data), padding to
// general.alignment (default 32), then the data. A string is a uint64
// length and its bytes.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpumem/common/files.h"
#include "gpumem/weights/weight_file.h"

namespace gpumem::weights {

// One ggml tensor type: `block_size` elements take `type_size` bytes.
struct GgmlType {
  uint32_t id = 0;
  std::string_view name;  // as ggml's type traits name it, upper case ("Q4_K")
  uint32_t block_size = 0;
  uint32_t type_size = 0;
};

// nullptr for an id ggml does not define (or has retired: 4, 5, 31-33, 36-38).
const GgmlType* ggml_type(uint32_t id);
// By name, case-insensitive ("q4_k" finds Q4_K); nullptr when unknown.
const GgmlType* ggml_type_named(std::string_view name);

// The value types of GGUF key-values (gguf_type's numbering).
enum class GgufType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// Bytes of one number of a GGUF type; 0 for strings and arrays.
uint64_t gguf_scalar_size(GgufType type);

// A typed value to write. Integers of every width live in `integer` (signed
// ones as their two's complement), floats in `real`, strings in `text`; an
// array has `element_type` and one GgufValue per element (no nesting), or,
// for numbers, their little-endian bytes as a GGUF file holds them in
// `packed` (what the reader gives: a value per element is ~90 bytes).
struct GgufValue {
  GgufType type = GgufType::kUint32;
  uint64_t integer = 0;
  double real = 0;
  std::string text;
  GgufType element_type = GgufType::kUint32;
  std::vector<GgufValue> elements;
  std::string packed;  // an array of numbers, as stored; `elements` is then empty

  static GgufValue string(std::string s);
  static GgufValue u32(uint32_t v);
  static GgufValue i32(int32_t v);
  static GgufValue u64(uint64_t v);
  static GgufValue f32(float v);
  static GgufValue boolean(bool v);
  static GgufValue strings(const std::vector<std::string>& values);
  static GgufValue i32s(const std::vector<int32_t>& values);
  static GgufValue f32s(const std::vector<float>& values);
};

struct GgufKeyValue {
  std::string key;
  GgufValue value;
};

struct GgufTensor {
  std::string name;
  uint32_t type = 0;         // a ggml type id
  std::vector<uint64_t> ne;  // ne[0] first, as GGUF stores it
  std::string data;          // exactly the tensor's bytes; empty for write_gguf_sparse
};

// What a writer needs. The alignment is general.alignment's value when the
// metadata has that key (a uint32), otherwise 32.
struct GgufContents {
  std::vector<GgufKeyValue> metadata;
  std::vector<GgufTensor> tensors;
};

// Bytes of a tensor of this type and shape. Throws std::invalid_argument for
// an unknown type, a zero or overflowing shape, or ne[0] not a multiple of
// the type's block size.
uint64_t ggml_tensor_bytes(uint32_t type, const std::vector<uint64_t>& ne);

// Reads path's header, key-values and tensor table through a read-only
// mapping. Metadata values become text: numbers as written, strings as
// they are, arrays of up to 8 numbers or short strings in full
// ("[1, 2, 3]"), longer ones as "[128256 strings]". Tensors get their
// absolute offset, their bytes from the type's block and type sizes, and
// the type's name as dtype. Throws InputError with one line, "PATH: byte N:
// problem" or "PATH: tensor 'NAME': problem", for anything the file does
// not back: counts or lengths past its end, an unknown value or tensor type,
// more than 4 dims, a zero dim or an overflowing element count, ne[0] not a
// multiple of the block size, an alignment that is not a power of two, a
// misaligned offset, data past the end, overlapping tensors, duplicate
// names or keys.
WeightFile read_gguf(const std::string& path);
// The same over bytes in memory; `path` only names them in messages.
WeightFile parse_gguf(std::string_view bytes, const std::string& path);

// The key-values of a GGUF file's bytes, typed, in file order: what a tool
// that rewrites a file copies to its output. Same checks and messages as
// parse_gguf's for the part it reads.
std::vector<GgufKeyValue> parse_gguf_metadata(std::string_view bytes, const std::string& path);

// A GGUF v3 image: header, key-values, tensor infos, padding, each tensor's
// data padded to the alignment. Throws std::invalid_argument when a
// tensor's data is not exactly ggml_tensor_bytes of its type and shape.
std::string write_gguf(const GgufContents& contents);

// Writes the same file with every tensor's data left as a hole: the header
// is written and the file extended to its full size, so that it takes
// almost no disk whatever its size. Tensors must have no data. Written
// atomically (a temporary file beside `path`, then renamed); throws
// InputError("cannot write PATH: reason") on failure.
void write_gguf_sparse(const std::string& path, const GgufContents& contents);

// Writes a GGUF v3 file a tensor at a time, so that memory holds one
// tensor, not the file: the constructor writes the header from `layout`
// (every tensor's name, type and shape; no data), add() each tensor's data
// in the same order, finish() checks that all came and renames the
// temporary file onto `path`. Destroyed before finish(), it leaves `path`
// as it was. InputError("cannot write PATH: reason") when writing fails;
// std::invalid_argument when the data does not match the layout.
class GgufStreamWriter {
 public:
  GgufStreamWriter(const std::string& path, const GgufContents& layout);
  void add(std::string_view data);
  // The file's size.
  uint64_t finish();

 private:
  AtomicFileWriter out_;
  std::vector<std::pair<std::string, uint64_t>> expected_;  // name, bytes
  size_t next_ = 0;
  uint64_t alignment_ = 32;
};

}  // namespace gpumem::weights
