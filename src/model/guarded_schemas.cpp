#include "model/guarded_schemas.h"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <onnx/defs/shape_inference.h>

namespace gpumem::detail {
namespace {

// ONNX 1.12's inference functions trust the nodes they are given: on some
// malformed nodes they index past a vector, divide by zero or loop for as
// long as a dimension is large, and the process dies with them. The guards
// below check what those functions assume and fail inference first (an
// exception, which the engine records as a failed node). They wrap the
// schemas handed out by GuardedRegistry, which serves the main graph and,
// through GraphInferenceContext, ONNX's own inference of every subgraph.

using Guard = void (*)(onnx::InferenceContext&);

// More axes than any real tensor has. Inference propagates ranks from node
// to node, so a file could otherwise make every one of thousands of values
// carry tens of thousands of dimensions (gigabytes from a 40 KB model).
constexpr int kMaxInferredRank = 64;

int rank_of(const onnx::TypeProto& t) {
  switch (t.value_case()) {
    case onnx::TypeProto::kTensorType: return t.tensor_type().has_shape() ? t.tensor_type().shape().dim_size() : 0;
    case onnx::TypeProto::kSparseTensorType:
      return t.sparse_tensor_type().has_shape() ? t.sparse_tensor_type().shape().dim_size() : 0;
    case onnx::TypeProto::kSequenceType: return rank_of(t.sequence_type().elem_type());
    case onnx::TypeProto::kOptionalType: return rank_of(t.optional_type().elem_type());
    case onnx::TypeProto::kMapType: return rank_of(t.map_type().value_type());
    default: return 0;
  }
}

void check_input_ranks(onnx::InferenceContext& ctx) {
  for (size_t i = 0; i < ctx.getNumInputs(); ++i) {
    const auto* type = ctx.getInputType(i);
    if (type && rank_of(*type) > kMaxInferredRank) {
      fail_shape_inference("input ", i, " has ", rank_of(*type), " axes, more than ", kMaxInferredRank);
    }
  }
}

// An output of absurd rank (a Reshape to a folded 60000-value shape) keeps
// its element type and loses its shape.
void cap_output_ranks(onnx::InferenceContext& ctx) {
  for (size_t i = 0; i < ctx.getNumOutputs(); ++i) {
    auto* type = ctx.getOutputType(i);
    if (type && type->has_tensor_type() && rank_of(*type) > kMaxInferredRank) {
      type->mutable_tensor_type()->clear_shape();
    }
  }
}

// The input's tensor shape as ONNX's functions read it; nullptr when absent.
const onnx::TensorShapeProto* input_shape(onnx::InferenceContext& ctx, size_t i) {
  if (i >= ctx.getNumInputs()) return nullptr;
  const auto* type = ctx.getInputType(i);
  if (!type || !type->has_tensor_type() || !type->tensor_type().has_shape()) return nullptr;
  return &type->tensor_type().shape();
}

// Conv, ConvTranspose and the pools (convPoolShapeInference and friends):
// they size their per-axis vectors from the input's rank and then walk the
// kernel read from the weight's rank; they divide by each stride; with
// auto_pad they subtract the stride from a dimension until it is smaller.
void guard_conv_pool(onnx::InferenceContext& ctx, size_t weight) {
  const auto* x = input_shape(ctx, 0);
  if (!x || x->dim_size() < 2) return;  // ONNX handles these
  if (const auto* w = weight < ctx.getNumInputs() ? input_shape(ctx, weight) : nullptr;
      w && w->dim_size() != x->dim_size()) {
    fail_shape_inference("the weight has rank ", w->dim_size(), " but the input has rank ", x->dim_size());
  }
  for (const char* name : {"strides", "dilations"}) {
    if (const auto* a = ctx.getAttribute(name)) {
      for (int64_t v : a->ints()) {
        if (v < 1) fail_shape_inference("attribute ", name, " has a value below 1: ", v);
      }
    }
  }
  if (const auto* pad = ctx.getAttribute("auto_pad"); pad && pad->s() != "VALID") {
    for (int i = 2; i < x->dim_size(); ++i) {
      if (x->dim(i).has_dim_value() && x->dim(i).dim_value() > (int64_t{1} << 32)) {
        fail_shape_inference("auto_pad on a spatial dimension of ", x->dim(i).dim_value());
      }
    }
  }
}

void guard_conv(onnx::InferenceContext& ctx) { guard_conv_pool(ctx, 1); }
void guard_qlinear_conv(onnx::InferenceContext& ctx) { guard_conv_pool(ctx, 3); }
void guard_pool(onnx::InferenceContext& ctx) { guard_conv_pool(ctx, SIZE_MAX); }

// Inputs whose rank the function assumes: when the input has a shape, it
// must have exactly that rank.
void require_rank(onnx::InferenceContext& ctx, size_t input, int rank) {
  if (const auto* shape = input_shape(ctx, input); shape && shape->dim_size() != rank) {
    fail_shape_inference("input ", input, " has rank ", shape->dim_size(), ", not ", rank);
  }
}

// ConstantOfShape and Expand with an unknown shape value give their output
// as many axes as the shape input's length, one at a time: a length of 2^40
// never ends.
void guard_shape_input(onnx::InferenceContext& ctx, size_t input) {
  if (const auto* shape = input_shape(ctx, input); shape && shape->dim_size() == 1 && shape->dim(0).has_dim_value() &&
                                                   shape->dim(0).dim_value() > kMaxInferredRank) {
    fail_shape_inference("a shape of ", shape->dim(0).dim_value(), " values");
  }
}

void guard_constant_of_shape(onnx::InferenceContext& ctx) { guard_shape_input(ctx, 0); }
void guard_expand(onnx::InferenceContext& ctx) { guard_shape_input(ctx, 1); }

// Functions that read an input's type without checking it exists.
void guard_typed_inputs(onnx::InferenceContext& ctx) {
  for (size_t i = 0; i < ctx.getNumInputs(); ++i) {
    if (!ctx.getInputType(i)) fail_type_inference("the type of input ", i, " is unknown");
  }
}

// RNN, GRU, LSTM of opsets 1-13 index X's three dimensions unchecked.
void guard_rnn(onnx::InferenceContext& ctx) { require_rank(ctx, 0, 3); }

// Gemm 6 indexes the two dimensions of A and B unchecked.
void guard_gemm(onnx::InferenceContext& ctx) {
  require_rank(ctx, 0, 2);
  require_rank(ctx, 1, 2);
}

// DepthToSpace and SpaceToDepth divide by blocksize squared.
void guard_blocksize(onnx::InferenceContext& ctx) {
  const auto* a = ctx.getAttribute("blocksize");
  if (a && (a->i() < 1 || a->i() > (int64_t{1} << 20))) fail_shape_inference("blocksize ", a->i(), " is invalid");
}

// LayerNormalization reads the input's dims (shape or not) at `axis`.
void guard_layer_norm(onnx::InferenceContext& ctx) {
  if (ctx.getNumInputs() == 0 || !ctx.getInputType(0)) return;  // ONNX fails these itself
  const auto* x = input_shape(ctx, 0);
  if (!x) fail_shape_inference("the input has no shape");
  const int64_t rank = x->dim_size();
  const auto* a = ctx.getAttribute("axis");
  const int64_t axis = a ? a->i() : -1;
  if (rank == 0 || axis < -rank || axis >= rank) fail_shape_inference("axis ", axis, " for rank ", rank);
}

// STFT reads the signal's three dimensions whether it has a shape or not.
void guard_stft(onnx::InferenceContext& ctx) {
  if (ctx.getNumInputs() == 0 || !ctx.getInputType(0)) return;
  const auto* signal = input_shape(ctx, 0);
  if (!signal || signal->dim_size() != 3) fail_shape_inference("the signal needs a shape of rank 3");
  if (ctx.getNumInputs() > 2) require_rank(ctx, 2, 1);
}

// ONNX 1.12's Concat sums the axis in an `int`: four [1, 2^30] inputs gave
// [1, 0]. After it runs, the axis is summed again in 64 bits; a sum past
// 2^62 fails inference (the node is named in the error).
void recheck_concat(onnx::InferenceContext& ctx) {
  const auto* axis_attr = ctx.getAttribute("axis");
  auto* out = ctx.getOutputType(0);
  if (!axis_attr || !out || !out->has_tensor_type() || !out->tensor_type().has_shape()) return;
  const int rank = out->tensor_type().shape().dim_size();
  int64_t axis = axis_attr->i();
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return;
  int64_t total = 0;
  for (size_t i = 0; i < ctx.getNumInputs(); ++i) {
    const auto* shape = input_shape(ctx, i);
    if (!shape || shape->dim_size() != rank || !shape->dim(static_cast<int>(axis)).has_dim_value()) return;
    const int64_t d = shape->dim(static_cast<int>(axis)).dim_value();
    if (d < 0 || __builtin_add_overflow(total, d, &total) || total > (int64_t{1} << 62))
      fail_shape_inference("Concat: the inputs' axis ", axis, " sums past 2^62");
  }
  out->mutable_tensor_type()->mutable_shape()->mutable_dim(static_cast<int>(axis))->set_dim_value(total);
}

// Checks run after an op's own inference, where ONNX's arithmetic is unsafe.
Guard recheck_for(const onnx::OpSchema& schema) { return schema.Name() == "Concat" ? recheck_concat : nullptr; }

Guard guard_for(const onnx::OpSchema& schema) {
  if (schema.domain() == "ai.onnx.ml") return guard_typed_inputs;
  if (!schema.domain().empty()) return nullptr;
  static const std::map<std::string, Guard> kGuards = {
      {"Conv", guard_conv},
      {"ConvInteger", guard_conv},
      {"ConvTranspose", guard_conv},
      {"QLinearConv", guard_qlinear_conv},
      {"MaxPool", guard_pool},
      {"AveragePool", guard_pool},
      {"LpPool", guard_pool},
      {"RNN", guard_rnn},
      {"GRU", guard_rnn},
      {"LSTM", guard_rnn},
      {"Gemm", guard_gemm},
      {"DepthToSpace", guard_blocksize},
      {"SpaceToDepth", guard_blocksize},
      {"LayerNormalization", guard_layer_norm},
      {"STFT", guard_stft},
      {"EyeLike", guard_typed_inputs},
      {"ConstantOfShape", guard_constant_of_shape},
      {"Expand", guard_expand},
  };
  const auto it = kGuards.find(schema.Name());
  return it == kGuards.end() ? nullptr : it->second;
}

// Every inference function may read its required attributes unchecked.
void require_attributes(const onnx::OpSchema& schema, onnx::InferenceContext& ctx) {
  for (const auto& [name, attr] : schema.attributes()) {
    if (attr.required && !ctx.getAttribute(name)) fail_shape_inference("required attribute '", name, "' is missing");
  }
}

class GuardedRegistry final : public onnx::ISchemaRegistry {
 public:
  const onnx::OpSchema* GetSchema(const std::string& key, const int max_inclusive_version,
                                  const std::string& domain) const override {
    const auto* schema = onnx::OpSchemaRegistry::Instance()->GetSchema(key, max_inclusive_version, domain);
    if (!schema || !schema->has_type_and_shape_inference_function()) return schema;
    const std::lock_guard<std::mutex> lock(mutex_);
    auto& guarded = guarded_[schema];
    if (!guarded) {
      guarded = std::make_unique<onnx::OpSchema>(*schema);
      guarded->TypeAndShapeInferenceFunction(
          [schema, guard = guard_for(*schema), recheck = recheck_for(*schema),
           infer = schema->GetTypeAndShapeInferenceFunction()](onnx::InferenceContext& ctx) {
            require_attributes(*schema, ctx);
            check_input_ranks(ctx);
            if (guard) guard(ctx);
            infer(ctx);
            if (recheck) recheck(ctx);
            cap_output_ranks(ctx);
          });
    }
    return guarded.get();
  }

 private:
  mutable std::mutex mutex_;
  mutable std::map<const onnx::OpSchema*, std::unique_ptr<onnx::OpSchema>> guarded_;
};

}  // namespace

const onnx::ISchemaRegistry* guarded_schemas() {
  static const GuardedRegistry registry;
  return &registry;
}

}  // namespace gpumem::detail
