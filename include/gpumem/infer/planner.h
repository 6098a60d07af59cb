#pragma once
// `gpumem plan`: plan a MiniMalloc CSV or an ONNX model's activations, in
// one call; and check a given plan.
#include <optional>
#include <string>

#include "gpumem/common/verdict.h"
#include "gpumem/model/inspect.h"
#include "gpumem/plan/solver.h"
#include "gpumem/plan/validate.h"

namespace gpumem::infer {

struct PlanRequest {
  plan::SolveOptions solve;
  std::optional<int64_t> alignment;  // raised on every buffer to at least this
  bool in_place = true;              // models: allow in-place reuse
  InspectOptions model;              // models: --batch, --dim, --dtype
  uint64_t overhead_bytes = 0;       // models: the runtime's own memory, counted against the capacity
};

struct PlanReport {
  std::string input;
  bool from_model = false;
  plan::Problem problem;
  plan::SolveResult result;
  std::optional<int64_t> capacity;
  // CSV: arena <= capacity. Models: needed_bytes() <= capacity, since the
  // weights and the runtime share the device with the arena. True without one.
  Verdict verdict;   // needed_bytes() against the capacity (common/verdict.h); undecided without one
  bool fits = true;  // no capacity, or the verdict fits
  // Models only.
  uint64_t naive_bytes = 0;  // every activation its own memory
  int in_place_tensors = 0;
  uint64_t in_place_bytes = 0;
  int64_t arena_without_in_place = 0;  // the same solver without in-place reuse
  // Per buffer: the tensors it holds, "name [shape] dtype", those that
  // reuse it in place after "; then in place: "; "a subgraph's peak".
  std::vector<std::string> buffer_details;
  uint64_t weight_bytes = 0;    // resident weights
  uint64_t overhead_bytes = 0;  // as requested
  // What the device must hold: the arena, plus for models the resident
  // weights and the overhead.
  uint64_t needed_bytes() const { return static_cast<uint64_t>(result.plan.arena) + weight_bytes + overhead_bytes; }
  int64_t in_place_saved_bytes() const { return std::max<int64_t>(0, arena_without_in_place - result.plan.arena); }
};

// Whether plan_file() reads `path` as MiniMalloc's CSV (the name ends in
// .csv or .csv.gz, any case; gzip is recognised by its content) rather than
// as an ONNX model.
bool is_csv_path(const std::string& path);

// INPUT ending in .csv is read as MiniMalloc's format (an `offset` column
// there pins buffers), anything else as an ONNX model.
PlanReport plan_file(const std::string& path, const PlanRequest& request);

struct ValidationReport {
  std::string input;
  plan::Problem problem;
  std::vector<int64_t> offsets;
  std::optional<plan::Violation> violation;
  int64_t arena = 0;
  int64_t lower_bound = 0;
};

// Reads a plan (a CSV with an offset for every buffer) and checks it.
ValidationReport validate_plan_file(const std::string& path);

}  // namespace gpumem::infer
