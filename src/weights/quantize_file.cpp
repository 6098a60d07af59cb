// `gpumem quantize`'s pipeline: read the input's tensor table, choose every
// type first (the GGUF header lists them), then read, convert, measure and
// write one tensor at a time into a temporary file renamed at the end.
#include "gpumem/weights/quantize_file.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <thread>

#include <fmt/format.h>
#include <google/protobuf/io/coded_stream.h>
#include <onnx/onnx_pb.h>

#include "gpumem/common/error.h"
#include "gpumem/common/files.h"
#include "gpumem/common/mapped_file.h"
#include "gpumem/weights/gguf.h"
#include "gpumem/weights/quantize.h"
#include "gpumem/weights/weight_summary.h"

namespace gpumem::weights {
namespace {

constexpr uint32_t kQuantizationVersion = 2;  // GGML_QNT_VERSION, which llama-quantize writes

// One input tensor: where its bytes are and how the input lists its shape.
struct Source {
  std::string name, dtype;
  std::vector<uint64_t> shape;  // as the input lists it
  std::vector<uint64_t> ne;     // GGUF order
  std::string_view data;
  std::string owned;  // ONNX values stored as typed fields, made bytes
};

struct Input {
  std::string format;
  uint64_t file_bytes = 0;
  std::vector<Source> tensors;
  std::vector<GgufKeyValue> gguf_metadata;
  ModelHints hints;
  std::map<std::string, std::unique_ptr<MappedFile>> mapped;
  std::string onnx_bytes;
};

// A whole number's key-value; 0 when absent or of another type.
int integer_key(const std::vector<GgufKeyValue>& metadata, const std::string& key) {
  for (const auto& kv : metadata) {
    if (kv.key != key) continue;
    const auto t = kv.value.type;
    const bool whole = t == GgufType::kUint8 || t == GgufType::kInt8 || t == GgufType::kUint16 ||
                       t == GgufType::kInt16 || t == GgufType::kUint32 || t == GgufType::kInt32 ||
                       t == GgufType::kUint64 || t == GgufType::kInt64;
    return whole && kv.value.integer <= INT_MAX ? static_cast<int>(kv.value.integer) : 0;
  }
  return 0;
}

// What llama.cpp's rules read from the key-values: the architecture, its
// layers and experts, and whether it is a 70B Llama.
void hints_from_keys(const std::vector<GgufKeyValue>& metadata, ModelHints& hints) {
  const auto arch =
      std::find_if(metadata.begin(), metadata.end(), [](const auto& kv) { return kv.key == "general.architecture"; });
  if (arch == metadata.end() || arch->value.type != GgufType::kString) return;
  const std::string& a = arch->value.text;
  hints.architecture = a;
  hints.n_layer = integer_key(metadata, a + ".block_count");
  hints.n_expert = integer_key(metadata, a + ".expert_count");
  const int heads = integer_key(metadata, a + ".attention.head_count");
  const int kv_heads = integer_key(metadata, a + ".attention.head_count_kv");
  hints.llama_70b = a == "llama" && hints.n_layer == 80 && kv_heads > 0 && heads != kv_heads;
}

// ONNX's TensorProto.DataType -> the dtype names safetensors uses.
std::string onnx_dtype(int type) {
  switch (type) {
    case onnx::TensorProto::FLOAT: return "F32";
    case onnx::TensorProto::FLOAT16: return "F16";
    case onnx::TensorProto::BFLOAT16: return "BF16";
    case onnx::TensorProto::DOUBLE: return "F64";
    case onnx::TensorProto::INT64: return "I64";
    case onnx::TensorProto::INT32: return "I32";
    case onnx::TensorProto::INT16: return "I16";
    case onnx::TensorProto::INT8: return "I8";
    default: return onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(type));
  }
}

template <typename T>
void append_values(std::string& out, const T* values, size_t n, size_t width) {
  for (size_t i = 0; i < n; ++i) {
    const auto v = values[i];
    char bytes[sizeof v];
    std::memcpy(bytes, &v, sizeof v);
    out.append(bytes, width);  // little-endian hosts: the low bytes first
  }
}

void read_onnx(const std::string& path, Input& in) {
  bool gzipped = false;
  in.onnx_bytes = read_file(path, INT_MAX - 1, "over protobuf's 2 GiB limit", &gzipped);
  in.format = "onnx";
  in.file_bytes = std::filesystem::file_size(path);
  in.hints.onnx = true;
  onnx::ModelProto model;
  google::protobuf::io::CodedInputStream stream(reinterpret_cast<const uint8_t*>(in.onnx_bytes.data()),
                                                static_cast<int>(in.onnx_bytes.size()));
  stream.SetRecursionLimit(100);
  if (in.onnx_bytes.empty() || !model.ParseFromCodedStream(&stream) || !stream.ConsumedEntireMessage() ||
      !model.has_graph())
    throw InputError(fmt::format("{}: not a valid ONNX model (the protobuf is truncated, corrupted or has no graph)",
                                 printable(path)));
  // The tensors' bytes point into `model`, which dies here: keep them.
  for (const auto& t : model.graph().initializer()) {
    Source s;
    s.name = t.name();
    const auto fail = [&](const std::string& problem) {
      throw InputError(fmt::format("{}: tensor '{}': {}", printable(path), printable(s.name), problem));
    };
    if (t.data_location() == onnx::TensorProto::EXTERNAL)
      fail("its data is in an external file, which gpumem quantize does not read");
    s.dtype = onnx_dtype(t.data_type());
    uint64_t elements = 1;
    for (const int64_t d : t.dims()) {
      if (d < 0) fail(fmt::format("dimension {}", d));
      s.shape.push_back(static_cast<uint64_t>(d));
      elements *= static_cast<uint64_t>(d);
    }
    const uint64_t width = safetensors_dtype_bytes(s.dtype);
    if (width == 0) fail(fmt::format("dtype {} has no GGUF type", s.dtype));
    if (!t.raw_data().empty()) {
      s.owned = t.raw_data();
    } else {
      switch (t.data_type()) {
        case onnx::TensorProto::FLOAT: append_values(s.owned, t.float_data().data(), t.float_data_size(), 4); break;
        case onnx::TensorProto::DOUBLE: append_values(s.owned, t.double_data().data(), t.double_data_size(), 8); break;
        case onnx::TensorProto::INT64: append_values(s.owned, t.int64_data().data(), t.int64_data_size(), 8); break;
        default:  // int32_data holds INT32, INT16, INT8, FLOAT16 and BFLOAT16 values, one each
          append_values(s.owned, t.int32_data().data(), t.int32_data_size(), width);
      }
    }
    if (s.owned.size() != elements * width)
      fail(fmt::format("{} bytes of data for {} {} values", s.owned.size(), elements, s.dtype));
    in.tensors.push_back(std::move(s));
  }
  for (Source& s : in.tensors) s.data = s.owned;
}

void read_mapped(const std::string& path, Input& in) {
  WeightFile file = read_weight_file(path);
  in.format = file.format;
  in.file_bytes = file.file_bytes;
  for (const TensorEntry& e : file.tensors) {
    auto& m = in.mapped[e.file];
    if (!m) m = std::make_unique<MappedFile>(e.file);
    Source s;
    s.name = e.name;
    s.dtype = e.dtype;
    s.shape = e.shape;
    s.data = m->bytes().substr(e.offset, e.bytes);
    in.tensors.push_back(std::move(s));
  }
  if (file.format == "gguf") {
    // A GGUF without tensors has mapped nothing yet (it was an internal
    // error, map::at): its metadata is still read, and the file said empty below.
    auto& m = in.mapped[path];
    if (!m) m = std::make_unique<MappedFile>(path);
    in.gguf_metadata = parse_gguf_metadata(m->bytes(), path);
  }
}

Input read_input(const std::string& path) {
  Input in;
  bool onnx = path.ends_with(".onnx");
  if (onnx) {
    // A GGUF or safetensors file named .onnx is read as what it is.
    const MappedFile f(path);
    const std::string_view head = f.bytes().substr(0, 16);
    if (head.rfind("GGUF", 0) == 0 || (head.size() >= 9 && head[8] == '{')) onnx = false;
  }
  if (onnx)
    read_onnx(path, in);
  else
    read_mapped(path, in);
  const bool gguf = in.format == "gguf";
  for (Source& s : in.tensors) {
    s.ne = s.shape;
    if (!gguf) std::reverse(s.ne.begin(), s.ne.end());  // row-major: the last dimension is the row
    if (s.ne.empty()) s.ne.push_back(1);                // a scalar
    if (std::ranges::find(s.ne, uint64_t{0}) != s.ne.end())
      throw InputError(fmt::format("{}: tensor '{}': it has no elements, which GGUF cannot hold", printable(path),
                                   printable(s.name)));
  }
  return in;
}

float to_float(uint32_t type, const char* p) {
  uint16_t h;
  switch (type) {
    case 1: std::memcpy(&h, p, 2); return fp16_to_fp32(h);
    case 30: std::memcpy(&h, p, 2); return bf16_to_fp32(h);
    default: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
  }
}

std::vector<float> floats_of(uint32_t type, std::string_view data, size_t n) {
  std::vector<float> out(n);
  if (type == 0) {
    std::memcpy(out.data(), data.data(), n * 4);
  } else {
    for (size_t i = 0; i < n; ++i) out[i] = to_float(type, data.data() + 2 * i);
  }
  return out;
}

struct Converted {
  std::string bytes;
  double rmse = 0, max_abs = 0;
};

// Quantizes rows on every core, each thread a run of whole rows, and
// measures the round trip.
Converted convert(const std::vector<float>& values, uint64_t row, uint32_t type) {
  const auto id = static_cast<GgmlTypeId>(type);
  const size_t rows = values.size() / row;
  const size_t threads =
      std::clamp<size_t>(std::min<size_t>(std::thread::hardware_concurrency(), values.size() / (1 << 16)), 1, rows);
  std::vector<std::string> parts(threads);
  std::vector<double> squares(threads), maxima(threads);
  std::vector<std::exception_ptr> errors(threads);
  const auto work = [&](size_t k) {
    try {
      const size_t first = rows * k / threads, last = rows * (k + 1) / threads;
      const float* x = values.data() + first * row;
      const size_t n = (last - first) * row;
      parts[k] = quantize(id, x, n);
      // The round trip a few rows at a time, so that it costs no second
      // copy of the tensor.
      const size_t row_bytes = quantized_size(id, row);
      const size_t piece = std::max<size_t>(1, (size_t{1} << 16) / row);
      for (size_t r = 0; r < last - first; r += piece) {
        const size_t m = std::min(piece, last - first - r);
        const std::vector<float> back =
            dequantize(id, std::string_view(parts[k]).substr(r * row_bytes, m * row_bytes), m * row);
        const float* original = x + r * row;
        for (size_t i = 0; i < m * row; ++i) {
          const double diff = std::fabs(static_cast<double>(original[i]) - back[i]);
          squares[k] += diff * diff;
          maxima[k] = std::max(maxima[k], diff);
        }
      }
    } catch (...) {
      errors[k] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (size_t k = 1; k < threads; ++k) pool.emplace_back(work, k);
  work(0);
  for (auto& t : pool) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  Converted out;
  out.bytes.reserve(quantized_size(id, values.size()));
  double sum = 0;
  for (size_t k = 0; k < threads; ++k) {
    out.bytes += parts[k];
    sum += squares[k];
    out.max_abs = std::max(out.max_abs, maxima[k]);
  }
  out.rmse = values.empty() ? 0 : std::sqrt(sum / static_cast<double>(values.size()));
  return out;
}

void set_key(std::vector<GgufKeyValue>& metadata, const std::string& key, GgufValue value) {
  for (auto& kv : metadata) {
    if (kv.key == key) {
      kv.value = std::move(value);
      return;
    }
  }
  metadata.push_back({key, std::move(value)});
}

}  // namespace

QuantizeReport quantize_file(const std::string& input, const std::string& output, const QuantizeOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  Input in = read_input(input);
  if (in.format != "gguf")
    in.gguf_metadata.insert(in.gguf_metadata.begin(),
                            {"general.name", GgufValue::string(std::filesystem::path(input).stem().string())});
  std::erase_if(in.gguf_metadata, [](const GgufKeyValue& kv) { return kv.key.rfind("split.", 0) == 0; });
  for (const GgufKeyValue& kv : options.metadata) set_key(in.gguf_metadata, kv.key, kv.value);
  hints_from_keys(in.gguf_metadata, in.hints);
  std::vector<TensorShape> shapes;
  shapes.reserve(in.tensors.size());
  for (const Source& s : in.tensors) shapes.push_back({s.name, s.dtype, s.ne});
  std::vector<TypeChoice> choices;
  try {
    choices = choose_types(shapes, in.hints, options);
  } catch (const InputError& e) {
    const std::string what = e.what();
    if (what.rfind("tensor '", 0) == 0) throw InputError(fmt::format("{}: {}", printable(input), what));
    throw;
  }
  const QuantizeRecipe& recipe = *quantize_recipe_named(options.type);

  GgufContents layout;
  layout.metadata = std::move(in.gguf_metadata);
  set_key(layout.metadata, "general.quantization_version", GgufValue::u32(kQuantizationVersion));
  set_key(layout.metadata, "general.file_type", GgufValue::u32(recipe.file_type));
  for (size_t i = 0; i < in.tensors.size(); ++i)
    layout.tensors.push_back({in.tensors[i].name, choices[i].type, in.tensors[i].ne, {}});

  QuantizeReport report;
  report.input = input;
  report.output = output;
  report.format = in.format;
  report.type = std::string(recipe.name);
  report.pure = options.pure;
  report.file_type = recipe.file_type;
  report.architecture = in.hints.architecture;
  if (!report.architecture.empty())
    report.architecture_from = options.metadata.empty() ? "input" : options.metadata_from;
  report.input_file_bytes = in.file_bytes;

  GgufStreamWriter writer(output, layout);
  for (size_t i = 0; i < in.tensors.size(); ++i) {
    const Source& s = in.tensors[i];
    const TypeChoice& c = choices[i];
    QuantizedTensor t;
    t.name = s.name;
    t.shape = s.shape;
    t.from = s.dtype;
    t.to = std::string(ggml_type(c.type)->name);
    t.why = c.why;
    t.elements = 1;
    for (const uint64_t n : s.ne) t.elements *= n;
    t.bytes_before = s.data.size();
    if (!c.convert) {
      writer.add(s.data);
      t.bytes_after = s.data.size();
    } else {
      try {
        const auto source = ggml_type_named(s.dtype)->id;
        const Converted out = convert(floats_of(source, s.data, t.elements), s.ne[0], c.type);
        writer.add(out.bytes);
        t.bytes_after = out.bytes.size();
        t.rmse = out.rmse;
        t.max_abs = out.max_abs;
        ++report.converted;
      } catch (const InputError& e) {
        throw InputError(fmt::format("{}: tensor '{}': {}", printable(input), printable(s.name), e.what()));
      }
    }
    report.elements += t.elements;
    report.bytes_before += t.bytes_before;
    report.bytes_after += t.bytes_after;
    report.tensors.push_back(std::move(t));
  }
  report.output_file_bytes = writer.finish();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace gpumem::weights
