#pragma once
// Loading an ONNX model: parse, check, infer every shape, build the Graph.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpumem/model/graph.h"

namespace gpumem {

struct LoadOptions {
  // --dim NAME=VALUE: binds every dimension with that dim_param.
  std::map<std::string, int64_t> dims;
  // --batch N: binds the first dimension of every graph input.
  std::optional<int64_t> batch;
};

// What shape inference could not do, by name, so reports can say why a total
// is a lower bound.
struct ShapeInferenceNotes {
  std::vector<std::string> unknown_ops;   // "domain::Op" with no schema
  std::vector<std::string> failed_nodes;  // "node (Op): reason"
  std::vector<std::string> unbound_dims;  // dim_params left symbolic
  int folded_nodes = 0;                   // nodes evaluated at load time
};

struct Model {
  std::string path;  // as given by the caller, for messages and reports
  std::string producer;
  int64_t ir_version = 0;
  int64_t opset = 0;  // default-domain opset
  Graph graph;
  ShapeInferenceNotes notes;
  // The symbol the file gives the first dimension of its first input (what
  // --batch overrides), before --dim binds it; empty when it is a number.
  std::string batch_symbol;
};

// Loads a model file. Throws InputError with a one-line message naming the
// file and the problem: missing, unreadable, not ONNX, corrupted, nodes out
// of topological order, impossible dimensions.
Model load_onnx_model(const std::filesystem::path& path, const LoadOptions& options = {});

// The same for bytes already in memory; `display_name` stands in for the path
// in messages.
Model load_onnx_model_from_bytes(std::string_view bytes, const std::string& display_name,
                                 const LoadOptions& options = {});

}  // namespace gpumem
