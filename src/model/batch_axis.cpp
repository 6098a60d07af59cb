#include "model/batch_axis.h"
#include "gpumem/common/flag_names.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/common/units.h"

namespace gpumem {

std::string BatchAxis::describe() const {
  const std::string which = symbol.empty() ? fmt::format("dimension {}", axis) : fmt::format("dimension '{}'", symbol);
  return fmt::format("{} of '{}' ({})", which, input, evidence);
}

namespace detail {
namespace {

using Dims = google::protobuf::RepeatedPtrField<onnx::TensorShapeProto_Dimension>;

// Graph inputs that are not weights and have a shape of rank >= 1.
std::vector<const onnx::ValueInfoProto*> data_inputs(const onnx::GraphProto& graph) {
  std::set<std::string> initializers;
  for (const auto& init : graph.initializer()) initializers.insert(init.name());
  std::vector<const onnx::ValueInfoProto*> out;
  for (const auto& in : graph.input()) {
    if (initializers.count(in.name()) || !in.type().has_tensor_type() || !in.type().tensor_type().has_shape()) continue;
    if (in.type().tensor_type().shape().dim_size() == 0) continue;
    out.push_back(&in);
  }
  return out;
}

const Dims& dims_of(const onnx::ValueInfoProto& v) { return v.type().tensor_type().shape().dim(); }

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// torch.onnx.export's dynamic_axes names ("batch", "batch_size", "N", "bs").
bool named_like_batch(const std::string& name) {
  const std::string n = lower(name);
  return n.find("batch") != std::string::npos || n == "n" || n == "b" || n == "bs";
}

bool named_like_sequence(const std::string& name) {
  const std::string n = lower(name);
  for (const char* word : {"seq", "len", "token", "time", "pos", "step", "width", "height", "channel"})
    if (n.find(word) != std::string::npos) return true;
  return false;
}

}  // namespace

BatchAxis find_batch_axis(const onnx::GraphProto& graph, const std::string& batch_dim, const std::string& file) {
  const auto inputs = data_inputs(graph);
  BatchAxis b;
  if (inputs.empty()) return b;
  b.input = inputs.front()->name();
  // Symbols in input order, each with the inputs it appears in.
  std::vector<std::string> order;
  std::vector<std::set<const onnx::ValueInfoProto*>> seen_in;
  for (const auto* in : inputs) {
    for (const auto& d : dims_of(*in)) {
      if (!d.has_dim_param() || d.dim_param().empty()) continue;
      auto it = std::find(order.begin(), order.end(), d.dim_param());
      if (it == order.end()) {
        order.push_back(d.dim_param());
        seen_in.emplace_back();
        it = order.end() - 1;
      }
      seen_in[static_cast<size_t>(it - order.begin())].insert(in);
    }
  }
  if (!batch_dim.empty()) {
    b.evidence = GPUMEM_FLAG_BATCH_DIM;
    const bool index = std::all_of(batch_dim.begin(), batch_dim.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (index && batch_dim.size() <= 3) {
      b.axis = std::stoi(batch_dim);
      for (const auto* in : inputs) {
        if (b.axis >= dims_of(*in).size()) {
          throw InputError(fmt::format("{}: " GPUMEM_FLAG_BATCH_DIM " {}: input '{}' has {} dimension(s)", file,
                                       batch_dim, printable(in->name()), dims_of(*in).size()));
        }
      }
      return b;
    }
    if (std::find(order.begin(), order.end(), batch_dim) == order.end()) {
      std::string known;
      for (const auto& s : order) known += (known.empty() ? "'" : ", '") + printable(s) + "'";
      throw InputError(fmt::format("{}: " GPUMEM_FLAG_BATCH_DIM
                                   " {}: no input has a dimension of that name (candidates: {}{}an axis index, "
                                   "0 to {})",
                                   file, printable(batch_dim), known, known.empty() ? "" : ", or ",
                                   dims_of(*inputs.front()).size() - 1));
    }
    b.symbol = batch_dim;
    return b;
  }
  for (const auto& s : order) {
    if (named_like_batch(s)) {
      b.symbol = s;
      b.evidence = "named so";
      return b;
    }
  }
  std::vector<std::string> shared;
  for (size_t i = 0; i < order.size(); ++i) {
    if (seen_in[i].size() == inputs.size() && !named_like_sequence(order[i])) shared.push_back(order[i]);
  }
  if (shared.size() == 1) {
    b.symbol = shared.front();
    b.evidence = "the only dimension all data inputs share that is not named like a sequence";
    return b;
  }
  const auto& first = dims_of(*inputs.front())[0];
  if (first.has_dim_param() && !first.dim_param().empty()) b.symbol = first.dim_param();
  // Images and volumes are batched first in every layout PyTorch exports
  // (NCHW, NCDHW, and NHWC too); token and feature matrices may be
  // sequence-first, so their first axis is only assumed.
  const auto elem = inputs.front()->type().tensor_type().elem_type();
  const bool floating = elem == onnx::TensorProto::FLOAT || elem == onnx::TensorProto::FLOAT16 ||
                        elem == onnx::TensorProto::BFLOAT16 || elem == onnx::TensorProto::DOUBLE;
  if (floating && dims_of(*inputs.front()).size() >= 4) {
    b.evidence = "the first axis of an image batch";
    return b;
  }
  b.assumed = true;
  b.evidence = "assumed: the export names no batch axis; " GPUMEM_FLAG_BATCH_DIM " chooses another";
  return b;
}

void bind_batch(onnx::GraphProto& graph, const BatchAxis& axis, int64_t batch) {
  auto bind_symbol = [&](google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>& values) {
    for (auto& vi : values) {
      if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) continue;
      for (auto& d : *vi.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim()) {
        if (d.has_dim_param() && d.dim_param() == axis.symbol) d.set_dim_value(batch);
      }
    }
  };
  if (!axis.symbol.empty()) {
    bind_symbol(*graph.mutable_input());
    bind_symbol(*graph.mutable_output());
    bind_symbol(*graph.mutable_value_info());
    return;
  }
  std::set<std::string> data;
  for (const auto* in : data_inputs(graph)) data.insert(in->name());
  for (auto& in : *graph.mutable_input()) {
    if (!data.count(in.name())) continue;
    auto* shape = in.mutable_type()->mutable_tensor_type()->mutable_shape();
    if (axis.axis < shape->dim_size()) shape->mutable_dim(axis.axis)->set_dim_value(batch);
  }
}

AxisPositions batch_positions(const onnx::GraphProto& graph, const BatchAxis& axis) {
  AxisPositions out;
  for (const auto* in : data_inputs(graph)) {
    for (int i = 0; i < dims_of(*in).size(); ++i) {
      const auto& d = dims_of(*in)[i];
      if (axis.symbol.empty() ? i == axis.axis : d.dim_param() == axis.symbol) out.emplace_back(in->name(), i);
    }
  }
  return out;
}

int64_t batch_value(const onnx::GraphProto& graph, const AxisPositions& positions) {
  for (const auto& [name, index] : positions) {
    for (const auto& in : graph.input()) {
      if (in.name() != name) continue;
      const auto& d = dims_of(in)[index];
      if (d.has_dim_value()) return d.dim_value();
    }
  }
  return 0;
}

}  // namespace detail
}  // namespace gpumem
