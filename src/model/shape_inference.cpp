#include "model/shape_inference.h"

#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <set>

#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include "model/constant_folding.h"
#include "model/guarded_schemas.h"
#include "model/tensor_value.h"

namespace gpumem::detail {
namespace {

std::string normalise_domain(const std::string& d) { return d == "ai.onnx" ? std::string() : d; }

onnx::TypeProto tensor_type(int32_t elem_type, const std::vector<int64_t>& dims) {
  onnx::TypeProto t;
  auto* tt = t.mutable_tensor_type();
  tt->set_elem_type(elem_type);
  auto* shape = tt->mutable_shape();
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
  return t;
}

std::optional<std::vector<int64_t>> static_dims(const onnx::TypeProto& t) {
  if (!t.has_tensor_type() || !t.tensor_type().has_shape()) return std::nullopt;
  std::vector<int64_t> dims;
  for (const auto& d : t.tensor_type().shape().dim()) {
    if (!d.has_dim_value() || d.dim_value() < 0) return std::nullopt;
    dims.push_back(d.dim_value());
  }
  return dims;
}

bool has_tensor_type(const onnx::TypeProto& t) {
  return t.value_case() != onnx::TypeProto::VALUE_NOT_SET &&
         (!t.has_tensor_type() || t.tensor_type().elem_type() != 0 || t.tensor_type().has_shape());
}

// The value a Constant node defines, in whichever attribute it was written.
std::optional<onnx::TensorProto> constant_tensor(const onnx::NodeProto& node) {
  for (const auto& a : node.attribute()) {
    onnx::TensorProto t;
    if (a.name() == "value" && a.has_t()) return a.t();
    if (a.name() == "value_float") {
      t.set_data_type(onnx::TensorProto_DataType_FLOAT);
      t.add_float_data(a.f());
      return t;
    }
    if (a.name() == "value_int") {
      t.set_data_type(onnx::TensorProto_DataType_INT64);
      t.add_int64_data(a.i());
      return t;
    }
    if (a.name() == "value_floats") {
      t.set_data_type(onnx::TensorProto_DataType_FLOAT);
      t.add_dims(a.floats_size());
      for (float f : a.floats()) t.add_float_data(f);
      return t;
    }
    if (a.name() == "value_ints") {
      t.set_data_type(onnx::TensorProto_DataType_INT64);
      t.add_dims(a.ints_size());
      for (int64_t i : a.ints()) t.add_int64_data(i);
      return t;
    }
    if (a.name() == "value_string") {
      t.set_data_type(onnx::TensorProto_DataType_STRING);
      t.add_string_data(a.s());
      return t;
    }
    if (a.name() == "value_strings") {
      t.set_data_type(onnx::TensorProto_DataType_STRING);
      t.add_dims(a.strings_size());
      for (const auto& s : a.strings()) t.add_string_data(s);
      return t;
    }
    if (a.name() == "sparse_value" && a.has_sparse_tensor()) {
      t.set_data_type(a.sparse_tensor().values().data_type());
      for (int64_t d : a.sparse_tensor().dims()) t.add_dims(d);
      return t;  // dims and type only: a dense view of a sparse constant
    }
  }
  return std::nullopt;
}

class Engine {
 public:
  explicit Engine(onnx::ModelProto& model) : model_(model) {
    for (const auto& op : model.opset_import()) opsets_[normalise_domain(op.domain())] = static_cast<int>(op.version());
    if (!opsets_.count("")) opsets_[""] = 1;
    graph_ctx_ = std::make_unique<onnx::shape_inference::GraphInferenceContext>(
        type_ptrs_, opsets_, &symbols_, onnx::shape_inference::ModelLocalFunctionsMap{}, guarded_schemas(), nullptr,
        static_cast<int>(model.ir_version()));
  }

  ShapeInferenceOutput run() {
    auto& graph = *model_.mutable_graph();
    symbols_.addFromGraph(graph);
    for (const auto& vi : graph.value_info()) declared_[vi.name()] = vi.type();
    for (const auto& vi : graph.output()) declared_[vi.name()] = vi.type();
    for (const auto& init : graph.initializer()) add_initializer(init);
    for (const auto& in : graph.input()) {
      if (!types_.count(in.name()) && has_tensor_type(in.type())) set_type(in.name(), in.type());
    }
    for (auto& node : *graph.mutable_node()) infer_node(node);
    ShapeInferenceOutput out;
    out.types = std::move(types_);
    out.notes = std::move(notes_);
    out.notes.unknown_ops.assign(unknown_ops_.begin(), unknown_ops_.end());
    return out;
  }

 private:
  void set_type(const std::string& name, const onnx::TypeProto& t) {
    auto& slot = types_[name];
    slot = t;
    type_ptrs_[name] = &slot;  // unordered_map keeps element addresses stable
  }

  void set_value(const std::string& name, TensorValue v) {
    auto& stored = values_.insert_or_assign(name, std::move(v)).first->second;
    // ONNX's inference functions read constant inputs (Reshape's shape,
    // Slice's starts...) from TensorProtos: give them the folded value.
    if (stored.dtype == DType::Int64 || stored.dtype == DType::Int32 || stored.dtype == DType::Float ||
        stored.dtype == DType::Double) {
      protos_.push_back(stored.to_proto());
      data_[name] = &protos_.back();
    }
  }

  void add_initializer(const onnx::TensorProto& init) {
    set_type(init.name(), tensor_type(init.data_type(), {init.dims().begin(), init.dims().end()}));
    if (data_state(init) == DataState::Inline && !check_tensor_data(init)) {
      data_[init.name()] = &init;
      if (auto v = read_tensor_value(init)) values_.insert_or_assign(init.name(), std::move(*v));
    }
  }

  void infer_node(onnx::NodeProto& node) {
    const std::string domain = normalise_domain(node.domain());
    const auto opset_it = opsets_.find(domain);
    const int opset = opset_it == opsets_.end() ? 1 : opset_it->second;

    if (domain.empty() && node.op_type() == "Constant" && node.output_size() == 1) {
      if (auto t = constant_tensor(node)) {
        set_type(node.output(0), tensor_type(t->data_type(), {t->dims().begin(), t->dims().end()}));
        if (auto v = read_tensor_value(*t)) set_value(node.output(0), std::move(*v));
      }
      return;
    }

    std::vector<onnx::TypeProto> inferred(static_cast<size_t>(node.output_size()));
    const auto* schema = guarded_schemas()->GetSchema(node.op_type(), opset, domain);
    if (!schema) {
      unknown_ops_.insert((domain.empty() ? std::string() : domain + "::") + node.op_type());
    } else if (schema->has_type_and_shape_inference_function()) {
      try {
        onnx::shape_inference::InferenceContextImpl ctx(node, type_ptrs_, data_, {}, nullptr, graph_ctx_.get());
        schema->GetTypeAndShapeInferenceFunction()(ctx);
        for (size_t i = 0; i < inferred.size(); ++i) inferred[i] = *ctx.getOutputType(i);
      } catch (const std::exception& e) {
        std::string what = e.what();
        if (const auto nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
        notes_.failed_nodes.push_back((node.name().empty() ? node.op_type() : node.name()) + " (" + node.op_type() +
                                      "): " + what);
      }
    }

    if (domain.empty() && node.op_type() == "BatchNormalization") statistics_like_scale(node, inferred);
    if (domain.empty() && node.op_type() == "Dropout") mask_like_input(node, inferred);

    for (int i = 0; i < node.output_size(); ++i) {
      const std::string& name = node.output(i);
      if (name.empty()) continue;
      const auto& mine = inferred[static_cast<size_t>(i)];
      const auto declared = declared_.find(name);
      const bool mine_has_shape = mine.has_tensor_type() && mine.tensor_type().has_shape();
      if (declared != declared_.end() && !mine_has_shape && has_tensor_type(declared->second)) {
        set_type(name, declared->second);  // the file's own annotation, when inference has no shape
      } else if (has_tensor_type(mine)) {
        set_type(name, mine);
      }
    }
    fold(node, opset);
  }

  // BatchNormalization's training outputs (running mean and variance, and
  // before opset 14 the saved mean and variance) are per channel, like its
  // scale; ONNX's inference for opsets 9 to 13 gives them no type, which a
  // training-mode export at those opsets (torch.onnx writes all five) needs.
  void statistics_like_scale(const onnx::NodeProto& node, std::vector<onnx::TypeProto>& inferred) {
    if (node.input_size() < 2) return;
    const auto scale = types_.find(node.input(1));
    if (scale == types_.end() || !static_dims(scale->second)) return;
    for (size_t i = 1; i < inferred.size() && i < 5; ++i) {
      const auto& t = inferred[i];
      if (!t.has_tensor_type() || !t.tensor_type().has_shape()) inferred[i] = scale->second;
    }
  }

  // Dropout's mask has its input's shape; before opset 12 ONNX's inference
  // leaves it untyped, and a training-mode export writes it.
  void mask_like_input(const onnx::NodeProto& node, std::vector<onnx::TypeProto>& inferred) {
    if (node.input_size() < 1 || inferred.size() < 2) return;
    const auto& t = inferred[1];
    if (t.has_tensor_type() && t.tensor_type().has_shape()) return;
    const auto in = types_.find(node.input(0));
    if (in == types_.end() || !static_dims(in->second)) return;
    inferred[1] = tensor_type(onnx::TensorProto::BOOL, *static_dims(in->second));
  }

  void fold(const onnx::NodeProto& node, int opset) {
    FoldInputs in;
    for (const auto& name : node.input()) {
      const auto v = values_.find(name);
      in.values.push_back(v == values_.end() ? nullptr : &v->second);
      const auto t = types_.find(name);
      in.shapes.push_back(t == types_.end() ? std::nullopt : static_dims(t->second));
    }
    auto folded = fold_node(node, opset, in);
    if (!folded || static_cast<int>(folded->size()) != node.output_size()) return;
    ++notes_.folded_nodes;
    for (int i = 0; i < node.output_size(); ++i) {
      auto& v = (*folded)[static_cast<size_t>(i)];
      const auto t = types_.find(node.output(i));
      if (t == types_.end() || !static_dims(t->second)) {
        set_type(node.output(i), tensor_type(static_cast<int32_t>(v.dtype), v.dims));
      }
      set_value(node.output(i), std::move(v));
    }
  }

  onnx::ModelProto& model_;
  std::unordered_map<std::string, int> opsets_;
  TypeMap types_;
  std::unordered_map<std::string, onnx::TypeProto*> type_ptrs_;
  TypeMap declared_;
  std::unordered_map<std::string, const onnx::TensorProto*> data_;
  std::unordered_map<std::string, TensorValue> values_;
  std::deque<onnx::TensorProto> protos_;  // deque: stable addresses for data_
  onnx::shape_inference::SymbolTableImpl symbols_;
  std::unique_ptr<onnx::shape_inference::GraphInferenceContext> graph_ctx_;
  std::set<std::string> unknown_ops_;
  ShapeInferenceNotes notes_;
};

}  // namespace

ShapeInferenceOutput infer_shapes(onnx::ModelProto& model) { return Engine(model).run(); }

}  // namespace gpumem::detail
