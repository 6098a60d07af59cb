#pragma once
// Builds small ONNX models in tests, so each test states its graph inline.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

namespace gpumem::test {

// A dimension in a declared shape: a number, or a symbol when `param` is set.
struct D {
  int64_t value = -1;
  const char* param = nullptr;
  D(int64_t v) : value(v) {}      // NOLINT: implicit on purpose, for {1, 3, "N"}
  D(const char* p) : param(p) {}  // NOLINT
};

class OnnxBuilder {
 public:
  explicit OnnxBuilder(int64_t opset = 13) {
    model_.set_ir_version(8);
    model_.set_producer_name("gpumem-test");
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
  }

  onnx::GraphProto& graph() { return *model_.mutable_graph(); }
  onnx::ModelProto& model() { return model_; }

  static void set_type(onnx::ValueInfoProto& vi, const std::string& name, int32_t dtype, const std::vector<D>& dims) {
    vi.set_name(name);
    auto* tt = vi.mutable_type()->mutable_tensor_type();
    tt->set_elem_type(dtype);
    auto* shape = tt->mutable_shape();
    for (const auto& d : dims) {
      auto* dim = shape->add_dim();
      if (d.param) {
        dim->set_dim_param(d.param);
      } else {
        dim->set_dim_value(d.value);
      }
    }
  }

  OnnxBuilder& input(const std::string& name, const std::vector<D>& dims, int32_t dtype = onnx::TensorProto::FLOAT) {
    set_type(*graph().add_input(), name, dtype, dims);
    return *this;
  }
  OnnxBuilder& output(const std::string& name, const std::vector<D>& dims = {},
                      int32_t dtype = onnx::TensorProto::FLOAT) {
    auto* vi = graph().add_output();
    if (dims.empty()) {
      vi->set_name(name);
    } else {
      set_type(*vi, name, dtype, dims);
    }
    return *this;
  }
  // A graph-only initializer: dims and type, no data.
  OnnxBuilder& weight(const std::string& name, const std::vector<int64_t>& dims,
                      int32_t dtype = onnx::TensorProto::FLOAT) {
    auto* t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(dtype);
    for (int64_t d : dims) t->add_dims(d);
    return *this;
  }
  OnnxBuilder& int64_initializer(const std::string& name, const std::vector<int64_t>& values) {
    auto* t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
    return *this;
  }
  onnx::NodeProto& node(const std::string& op, std::initializer_list<std::string> inputs,
                        std::initializer_list<std::string> outputs, const std::string& name = {}) {
    auto* n = graph().add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return *n;
  }
  OnnxBuilder& constant_ints(const std::string& out, const std::vector<int64_t>& values) {
    auto& n = node("Constant", {}, {out});
    auto* a = n.add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    auto* t = a->mutable_t();
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
    return *this;
  }

  static void int_attr(onnx::NodeProto& n, const std::string& name, int64_t v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void ints_attr(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static onnx::GraphProto& graph_attr(onnx::NodeProto& n, const std::string& name) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::GRAPH);
    return *a->mutable_g();
  }

  std::string bytes() const { return model_.SerializeAsString(); }

 private:
  onnx::ModelProto model_;
};

// cond, x [1,256] -> If -> y -> Relu -> z. The then-branch (Relu, Neg on x)
// holds 2 KiB at its peak, the else-branch (Identity of x) 1 KiB: the If is
// charged 2 KiB while it runs.
inline std::string if_with_uneven_branches() {
  OnnxBuilder b;
  b.input("cond", {}, onnx::TensorProto::BOOL);
  b.input("x", {1, 256});
  auto& node = b.node("If", {"cond"}, {"y"}, "branch");
  auto& then_g = OnnxBuilder::graph_attr(node, "then_branch");
  then_g.set_name("then");
  auto* relu = then_g.add_node();
  relu->set_op_type("Relu");
  relu->add_input("x");  // an outer-scope value
  relu->add_output("t1");
  auto* neg = then_g.add_node();
  neg->set_op_type("Neg");
  neg->add_input("t1");
  neg->add_output("t2");
  OnnxBuilder::set_type(*then_g.add_output(), "t2", onnx::TensorProto::FLOAT, {1, 256});
  auto& else_g = OnnxBuilder::graph_attr(node, "else_branch");
  else_g.set_name("else");
  auto* identity = else_g.add_node();
  identity->set_op_type("Identity");
  identity->add_input("x");
  identity->add_output("e1");
  OnnxBuilder::set_type(*else_g.add_output(), "e1", onnx::TensorProto::FLOAT, {1, 256});
  b.node("Relu", {"y"}, {"z"});
  b.output("z");
  return b.bytes();
}

}  // namespace gpumem::test
