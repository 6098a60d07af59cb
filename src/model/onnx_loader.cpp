#include "gpumem/model/onnx_loader.h"
#include "gpumem/common/flag_names.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <google/protobuf/io/coded_stream.h>
#include <onnx/onnx_pb.h>

#include "common/file_kind.h"
#include "gpumem/common/error.h"
#include "gpumem/common/files.h"
#include "model/batch_axis.h"
#include "model/graph_builder.h"
#include "model/shape_inference.h"
#include "model/tensor_value.h"

namespace gpumem {
namespace {

// Protobuf refuses messages of 2 GiB or more; larger models keep their
// weights in external data files, which memory analysis does not need.
constexpr size_t kMaxModelBytes = INT_MAX;
// Subgraphs nest messages; 100 levels is ample for any real model and keeps a
// hostile file from exhausting the stack.
constexpr int kMaxNesting = 100;

std::string read_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(fmt::format("{}: is a directory, not a model file", printable(path.string())));
  // Before reading it all: a 4 GB GGUF is named as what it is.
  if (auto wrong = wrong_kind_error(path.string(), {FileKind::OnnxModel}, "an ONNX model")) throw InputError(*wrong);
  // No such file, a FIFO, a device: one line, and nothing read.
  const int fd = open_regular_file(path.string());
  struct stat st {};
  ::fstat(fd, &st);
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size >= kMaxModelBytes) {
    ::close(fd);
    throw InputError(fmt::format("{}: {} bytes is over protobuf's 2 GiB limit; save the weights as external data",
                                 printable(path.string()), size));
  }
  std::string bytes(static_cast<size_t>(size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    if (n <= 0) {
      const int e = errno;
      ::close(fd);
      throw InputError(fmt::format("{}: read failed: {}", printable(path.string()),
                                   n == 0 ? "the file got shorter" : std::strerror(e)));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return bytes;
}

onnx::ModelProto parse(std::string_view bytes, const std::string& name) {
  if (bytes.empty()) throw InputError(fmt::format("{}: empty file, not an ONNX model", name));
  if (bytes.size() >= kMaxModelBytes) throw InputError(fmt::format("{}: over protobuf's 2 GiB limit", name));
  onnx::ModelProto model;
  google::protobuf::io::CodedInputStream stream(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                static_cast<int>(bytes.size()));
  stream.SetRecursionLimit(kMaxNesting);
  const bool parsed = model.ParseFromCodedStream(&stream) && stream.ConsumedEntireMessage();
  if (!parsed || !model.has_graph() || model.ir_version() <= 0) {
    // Another kind of file gpumem reads (a trace given to inspect): say which command takes it.
    if (auto wrong = wrong_kind_error(bytes.substr(0, 4096), name, {FileKind::OnnxModel}, "an ONNX model"))
      throw InputError(*wrong);
  }
  if (!parsed) {
    throw InputError(fmt::format("{}: not a valid ONNX model: the protobuf is truncated or corrupted", name));
  }
  if (!model.has_graph() || model.ir_version() <= 0) {
    throw InputError(
        fmt::format("{}: not an ONNX model: {}", name, model.has_graph() ? "no IR version" : "no graph in the file"));
  }
  return model;
}

void collect_symbols(const google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>& values,
                     std::set<std::string>& out) {
  for (const auto& vi : values) {
    if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) continue;
    for (const auto& d : vi.type().tensor_type().shape().dim()) {
      if (d.has_dim_param() && !d.dim_param().empty()) out.insert(d.dim_param());
    }
  }
}

void bind_values(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>& values, const LoadOptions& options) {
  for (auto& vi : values) {
    if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) continue;
    for (auto& d : *vi.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim()) {
      if (!d.has_dim_param()) continue;
      if (const auto it = options.dims.find(d.dim_param()); it != options.dims.end()) d.set_dim_value(it->second);
    }
  }
}

// Applies --dim and --batch to the graph's declared types before inference.
void bind_dimensions(onnx::GraphProto& graph, const LoadOptions& options, const BatchAxis& axis,
                     const std::string& name) {
  std::set<std::string> symbols;
  collect_symbols(graph.input(), symbols);
  collect_symbols(graph.output(), symbols);
  collect_symbols(graph.value_info(), symbols);
  for (const auto& [dim, value] : options.dims) {
    if (value < 0) throw InputError(fmt::format(GPUMEM_FLAG_DIM " {}={}: a dimension cannot be negative", dim, value));
    if (!symbols.count(dim)) {
      std::string known;
      for (const auto& s : symbols) known += (known.empty() ? "" : ", ") + s;
      throw InputError(fmt::format(GPUMEM_FLAG_DIM " {}: {} has no dimension named '{}' (its symbolic dimensions: {})",
                                   dim, name, dim, known.empty() ? "none" : printable(known)));
    }
  }
  bind_values(*graph.mutable_input(), options);
  bind_values(*graph.mutable_output(), options);
  bind_values(*graph.mutable_value_info(), options);
  if (options.batch) {
    if (*options.batch <= 0)
      throw InputError(fmt::format(GPUMEM_FLAG_BATCH " {}: the batch size must be positive", *options.batch));
    // Two values for one axis: neither may win silently.
    if (!axis.symbol.empty() && options.dims.count(axis.symbol) && options.dims.at(axis.symbol) != *options.batch)
      throw InputError(fmt::format(GPUMEM_FLAG_BATCH " {} and " GPUMEM_FLAG_DIM
                                                     " {}={} both bind {}'s batch axis{}; give one",
                                   *options.batch, axis.symbol, options.dims.at(axis.symbol), name,
                                   options.batch_dim.empty() ? "" : " (the one " GPUMEM_FLAG_BATCH_DIM " names)"));
    detail::bind_batch(graph, axis, *options.batch);
  }
}

std::vector<std::string> unbound_symbols(const onnx::GraphProto& graph) {
  std::set<std::string> symbols;
  collect_symbols(graph.input(), symbols);
  return {symbols.begin(), symbols.end()};
}

// Dropout with a ratio of 0 (swin_t's and many configs' p=0): PyTorch's
// dropout returns its input untouched, keeping no noise or mask, where a
// Dropout node would be priced with both (issue 47: swin_t +3.5%). The ratio
// is an attribute before opset 12 and an input since, a Constant's output or
// an initializer.
void mark_passthrough_dropouts(const onnx::GraphProto& g, int64_t opset, Graph& graph) {
  const auto constant = [&](const std::string& name) -> std::optional<double> {
    if (name.empty()) return std::nullopt;
    const onnx::TensorProto* found = nullptr;
    for (const auto& init : g.initializer())
      if (init.name() == name) found = &init;
    for (const auto& node : g.node()) {
      if (node.op_type() != "Constant" || node.output_size() != 1 || node.output(0) != name) continue;
      for (const auto& a : node.attribute())
        if (a.name() == "value" && a.has_t()) found = &a.t();
    }
    if (found == nullptr) return std::nullopt;
    const auto value = detail::read_tensor_value(*found);
    if (!value || value->size() != 1) return std::nullopt;
    return value->real(0);
  };
  const auto n = std::min<size_t>(static_cast<size_t>(g.node_size()), graph.nodes.size());
  for (size_t i = 0; i < n; ++i) {
    const onnx::NodeProto& node = g.node(static_cast<int>(i));
    if (node.op_type() != "Dropout" || !node.domain().empty()) continue;
    std::optional<double> ratio = 0.5;  // ONNX's default
    if (opset < 12) {
      for (const auto& a : node.attribute())
        if (a.name() == "ratio") ratio = a.f();
    } else if (node.input_size() > 1 && !node.input(1).empty()) {
      ratio = constant(node.input(1));
    }
    if (ratio && *ratio == 0.0) graph.nodes[i].passthrough = true;
  }
}

int64_t default_opset(const onnx::ModelProto& model) {
  for (const auto& op : model.opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") return op.version();
  }
  return 0;
}

}  // namespace

Model load_onnx_model_from_bytes(std::string_view bytes, const std::string& display_name, const LoadOptions& options) {
  onnx::ModelProto proto = parse(bytes, display_name);
  Model model;
  model.path = display_name;
  model.producer = proto.producer_name() + (proto.producer_version().empty() ? "" : " " + proto.producer_version());
  model.ir_version = proto.ir_version();
  model.opset = default_opset(proto);

  // Structure first: a graph out of order is rejected before any inference.
  model.graph = detail::build_graph_structure(proto.graph(), display_name);
  mark_passthrough_dropouts(proto.graph(), model.opset, model.graph);
  model.batch_axis = detail::find_batch_axis(proto.graph(), options.batch_dim, display_name);
  const detail::AxisPositions batch_at = detail::batch_positions(proto.graph(), model.batch_axis);
  bind_dimensions(*proto.mutable_graph(), options, model.batch_axis, display_name);
  model.batch_axis.value = detail::batch_value(proto.graph(), batch_at);
  auto inferred = detail::infer_shapes(proto);
  model.notes = std::move(inferred.notes);
  model.notes.unbound_dims = unbound_symbols(proto.graph());
  detail::apply_types(model.graph, proto.graph(), inferred.types, display_name);
  return model;
}

Model load_onnx_model(const std::filesystem::path& path, const LoadOptions& options) {
  const std::string bytes = read_file(path);
  return load_onnx_model_from_bytes(bytes, path.string(), options);
}

}  // namespace gpumem
