#include "gpumem/report/plan_report.h"
#include "gpumem/common/flag_names.h"

#include <fmt/format.h>

#include "gpumem/common/units.h"
#include "gpumem/common/verdict.h"

namespace gpumem {
namespace {

std::string stop_explanation(plan::StopReason reason) {
  switch (reason) {
    case plan::StopReason::Optimal: return "the plan is optimal";
    case plan::StopReason::Fits:
      return "the plan fits the capacity (" GPUMEM_FLAG_MINIMIZE " keeps looking for a smaller one)";
    case plan::StopReason::NoFit: return "proven: no plan fits the capacity";
    case plan::StopReason::HeuristicOnly: return GPUMEM_FLAG_SOLVER " heuristic runs no exact search";
    case plan::StopReason::TimeLimit: return "the time limit ran out (" GPUMEM_FLAG_TIME_LIMIT ")";
    case plan::StopReason::NodeLimit: return "the node limit ran out";
    case plan::StopReason::TooLarge:
      return "a time partition has over 2,000 buffers, more than the exact search takes by default (" GPUMEM_FLAG_SOLVER
             " exact "
             "takes it)";
    case plan::StopReason::TooManyPairs:
      return "over 50 million pairs of buffers live at the same time: too many for the exact search";
  }
  return "unknown";
}

}  // namespace

std::string render_plan_text(const infer::PlanReport& r) {
  const auto& res = r.result;
  std::string out;
  auto line = [&out](const std::string& s = {}) { out += s + "\n"; };
  line(fmt::format("Plan        {}", r.input));
  line(fmt::format("            {} buffers, {} time partition(s)", format_count(r.problem.buffers.size()),
                   res.partitions > 0 ? res.partitions : 1));
  line();
  line(fmt::format("Arena       {:>12}  ({} bytes)", format_bytes(static_cast<uint64_t>(res.plan.arena)),
                   format_count(static_cast<uint64_t>(res.plan.arena))));
  line(fmt::format("Lower bound {:>12}  the most bytes alive at one time",
                   format_bytes(static_cast<uint64_t>(res.lower_bound))));
  if (res.optimal) {
    line(fmt::format("Optimal     proven{}",
                     res.plan.arena == res.lower_bound ? " (the arena equals the lower bound)" : ""));
  } else {
    line(fmt::format("Optimal     not proven: at most {} above the optimum",
                     format_bytes(static_cast<uint64_t>(res.gap_bytes))));
    line(fmt::format("            stopped: {}", stop_explanation(res.stopped)));
  }
  line(fmt::format("Solver      {}, {}{}", res.solver,
                   res.seconds < 1 ? fmt::format("{:.2f} ms", res.seconds * 1e3) : fmt::format("{:.2f} s", res.seconds),
                   res.nodes ? fmt::format(", {} search nodes", format_count(res.nodes)) : ""));
  if (r.from_model) {
    line();
    line(fmt::format("No reuse    {:>12}  every activation in its own memory", format_bytes(r.naive_bytes)));
    if (r.naive_bytes > 0 && res.plan.arena > 0) {
      line(fmt::format("            the plan needs {:.1f}x less",
                       static_cast<double>(r.naive_bytes) / static_cast<double>(res.plan.arena)));
    }
    line(fmt::format("In place    {:>12}  saved by {} tensor(s) written over a dying input ({} without in-place)",
                     format_bytes(static_cast<uint64_t>(r.in_place_saved_bytes())), r.in_place_tensors,
                     format_bytes(static_cast<uint64_t>(r.arena_without_in_place))));
  }
  const auto needed = r.needed_bytes();
  if (r.from_model) {
    line();
    line(fmt::format("Needs       {:>12}  on the device: {} of resident weights + the {} arena{}", format_bytes(needed),
                     format_bytes(r.weight_bytes), format_bytes(static_cast<uint64_t>(res.plan.arena)),
                     r.overhead_bytes ? fmt::format(" + {} of runtime overhead", format_bytes(r.overhead_bytes))
                                      : " (no runtime overhead counted: " GPUMEM_FLAG_OVERHEAD ")"));
  }
  if (r.capacity) {
    const auto capacity = static_cast<uint64_t>(*r.capacity);
    const auto taken = needed - static_cast<uint64_t>(res.plan.arena);
    if (!r.from_model) line();
    line(fmt::format(
        "Verdict     {}{}", verdict_line(r.verdict),
        !r.fits && static_cast<uint64_t>(res.proven_bound) + taken > capacity ? "; no plan fits (proven)" : ""));
  }
  return out;
}

nlohmann::ordered_json plan_to_json(const infer::PlanReport& r) {
  using json = nlohmann::ordered_json;
  const auto& res = r.result;
  json doc;
  doc["schema_version"] = kPlanSchemaVersion;
  doc["input"] = r.input;
  doc["kind"] = r.from_model ? "model" : "csv";
  doc["buffer_count"] = r.problem.buffers.size();
  doc["arena_bytes"] = res.plan.arena;
  doc["verdict"] = verdict_json(r.verdict);
  doc["lower_bound_bytes"] = res.lower_bound;
  doc["proven_bound_bytes"] = res.proven_bound;
  doc["optimal"] = res.optimal;
  doc["gap_bytes"] = res.gap_bytes;
  doc["solver"] = res.solver;
  doc["solve_seconds"] = res.seconds;
  doc["search_nodes"] = res.nodes;
  doc["partitions"] = res.partitions;
  doc["limit_reached"] = res.limit_reached;
  doc["stop_reason"] = plan::to_string(res.stopped);
  doc["capacity_bytes"] = r.capacity ? json(*r.capacity) : json(nullptr);
  doc["fits"] = r.fits;
  if (r.from_model) {
    doc["naive_bytes"] = r.naive_bytes;
    doc["inplace_saved_bytes"] = r.in_place_saved_bytes();
    doc["inplace_tensors"] = r.in_place_tensors;
    doc["arena_without_inplace_bytes"] = r.arena_without_in_place;
    doc["weights_resident_bytes"] = r.weight_bytes;
    doc["overhead_bytes"] = r.overhead_bytes;
    doc["needed_bytes"] = r.needed_bytes();
  }
  json buffers = json::array();
  for (size_t i = 0; i < r.problem.buffers.size(); ++i) {
    const auto& b = r.problem.buffers[i];
    json buffer = {{"id", b.id},     {"lower", b.lower},         {"upper", b.upper},
                   {"size", b.size}, {"alignment", b.alignment}, {"offset", res.plan.offsets[i]}};
    if (!b.gaps.empty()) {
      json gaps = json::array();
      for (const auto& g : b.gaps) {
        gaps.push_back({{"lower", g.lower},
                        {"upper", g.upper},
                        {"window", g.window ? json::array({g.window->lower, g.window->upper}) : json(nullptr)}});
      }
      buffer["gaps"] = std::move(gaps);
    }
    buffers.push_back(std::move(buffer));
  }
  doc["buffers"] = buffers;
  return doc;
}

std::string render_validation_text(const infer::ValidationReport& r) {
  if (r.violation) return fmt::format("{}: invalid plan: {}\n", r.input, r.violation->message);
  return fmt::format("{}: valid plan of {} buffers; arena {} ({} bytes), lower bound {}\n", r.input,
                     format_count(r.problem.buffers.size()), format_bytes(static_cast<uint64_t>(r.arena)),
                     format_count(static_cast<uint64_t>(r.arena)), format_bytes(static_cast<uint64_t>(r.lower_bound)));
}

}  // namespace gpumem
