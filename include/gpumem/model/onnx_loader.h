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
  // --batch N: binds the batch axis (Model::batch_axis) of every data input.
  std::optional<int64_t> batch;
  // --batch-dim: which axis is the batch: a symbolic dimension's name, or
  // an axis index ("1") taken in every data input. Empty: inferred.
  std::string batch_dim;
};

// The axis of the data inputs that is the batch, and why it was taken.
struct BatchAxis {
  std::string symbol;  // its dim_param when it has one (bound by name everywhere)
  int axis = 0;        // otherwise its index, taken in every data input
  std::string input;   // the first data input, for messages
  int64_t value = 0;   // its size as loaded (after --batch, --dim); 0: unknown
  // "--batch-dim", "named so", "the only symbol the data inputs share", or
  // "assumed: ..." when nothing in the export says which axis it is.
  std::string evidence;
  bool assumed = false;
  // In words for reports: "dimension 'batch' of 'input_ids' (named so)".
  std::string describe() const;
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
  // The batch axis (what --batch binds); its symbol is the file's, before
  // --dim binds it.
  BatchAxis batch_axis;
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
