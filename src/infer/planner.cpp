#include "gpumem/infer/planner.h"
#include "gpumem/common/flag_names.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <string_view>

#include "common/file_kind.h"
#include "gpumem/common/error.h"
#include "gpumem/common/progress.h"
#include "gpumem/infer/model_plan.h"
#include "gpumem/plan/csv.h"

namespace gpumem::infer {

bool is_csv_path(const std::string& path) {
  const auto ends_with = [&](std::string_view suffix) {
    return path.size() >= suffix.size() &&
           std::equal(path.end() - static_cast<std::ptrdiff_t>(suffix.size()), path.end(), suffix.begin(),
                      [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; });
  };
  // By name, or by content for a CSV named otherwise (plan.txt).
  return ends_with(".csv") || ends_with(".csv.gz") || file_kind_at(path) == FileKind::PlanCsv;
}

namespace {

// The search runs up to its time limit: the bar is the share of it spent.
plan::SolveResult solve_with_progress(const plan::Problem& problem, const plan::SolveOptions& options) {
  const Progress progress =
      Progress::timed(fmt::format("planning {} buffers", problem.buffers.size()), options.time_limit_seconds);
  return plan::solve(problem, options);
}

void apply_alignment(plan::Problem& problem, std::optional<int64_t> alignment) {
  if (!alignment) return;
  for (auto& b : problem.buffers) b.alignment = std::max(b.alignment, *alignment);
}

}  // namespace

PlanReport plan_file(const std::string& path, const PlanRequest& request) {
  if (request.alignment && *request.alignment < 1) throw InputError(GPUMEM_FLAG_ALIGNMENT " must be at least 1");
  PlanReport report;
  report.input = path;
  report.capacity = request.solve.capacity;
  if (is_csv_path(path)) {
    plan::CsvProblem csv = plan::read_csv(path);
    report.problem = std::move(csv.problem);
    for (size_t i = 0; i < report.problem.buffers.size(); ++i) {
      report.problem.buffers[i].fixed_offset = csv.offsets[i];
    }
    apply_alignment(report.problem, request.alignment);
    for (const auto& b : report.problem.buffers) {
      if (b.fixed_offset && *b.fixed_offset % b.alignment != 0) {
        throw InputError(fmt::format("{}: buffer '{}' is pinned at {}, not a multiple of its alignment {}", path,
                                     printable(b.id), *b.fixed_offset, b.alignment));
      }
    }
    try {
      report.result = solve_with_progress(report.problem, request.solve);
    } catch (const InputError& e) {
      throw InputError(path + ": " + e.what());
    }
  } else {
    report.from_model = true;
    const InspectResult inspected = inspect_model(path, request.model);
    require_bound_dimensions(inspected.model);
    ModelBuffers buffers = model_buffers(inspected.model.graph, inspected.memory, request.in_place);
    report.problem = std::move(buffers.problem);
    apply_alignment(report.problem, request.alignment);
    report.naive_bytes = buffers.naive_bytes;
    report.in_place_tensors = buffers.in_place_tensors;
    report.in_place_bytes = buffers.in_place_bytes;
    for (const std::vector<int>& held : buffers.tensors) {
      std::string what;
      for (std::size_t i = 0; i < held.size(); ++i) {
        const Tensor& t = inspected.model.graph.tensors[static_cast<std::size_t>(held[i])];
        what +=
            (i ? "; then in place: " : "") + t.name + " " + t.shape_string() + " " + std::string(dtype_name(t.dtype));
      }
      report.buffer_details.push_back(what.empty() ? "a subgraph's peak" : what);
    }
    report.weight_bytes = inspected.memory.weights.resident.bytes;
    report.overhead_bytes = request.overhead_bytes;
    // The arena gets what the weights and the runtime leave of the capacity.
    plan::SolveOptions options = request.solve;
    if (options.capacity) {
      const auto taken = static_cast<int64_t>(report.weight_bytes + report.overhead_bytes);
      options.capacity = std::max<int64_t>(0, *options.capacity - taken);
    }
    report.result = solve_with_progress(report.problem, options);
    if (request.in_place && buffers.in_place_tensors > 0) {
      // What in-place bought: the same solver, same limits, without it, and
      // minimising: a capacity's first fit would be an arbitrary plan.
      ModelBuffers plain = model_buffers(inspected.model.graph, inspected.memory, false);
      apply_alignment(plain.problem, request.alignment);
      plan::SolveOptions without = request.solve;
      without.capacity.reset();
      report.arena_without_in_place = plan::solve(plain.problem, without).plan.arena;
    } else {
      report.arena_without_in_place = report.result.plan.arena;
    }
  }
  report.verdict = {report.capacity ? static_cast<uint64_t>(*report.capacity) : 0, report.needed_bytes()};
  report.fits = !report.capacity || report.verdict.fits();
  return report;
}

ValidationReport validate_plan_file(const std::string& path) {
  ValidationReport report;
  report.input = path;
  plan::CsvProblem csv = plan::read_csv(path);
  if (!csv.has_offsets) throw InputError(path + ": no offset column: nothing to validate");
  report.problem = std::move(csv.problem);
  for (size_t i = 0; i < csv.offsets.size(); ++i) {
    if (!csv.offsets[i]) {
      throw InputError(fmt::format("{}: buffer '{}' has no offset", path, printable(report.problem.buffers[i].id)));
    }
    report.offsets.push_back(*csv.offsets[i]);
  }
  report.violation = plan::validate(report.problem, report.offsets);
  report.arena = arena_size(report.problem, report.offsets);
  report.lower_bound = plan::lower_bound(report.problem);
  return report;
}

}  // namespace gpumem::infer
