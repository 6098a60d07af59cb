// `gpumem report`: which page an input gets, and the analyses behind it.
#include <algorithm>
#include <cctype>
#include <exception>
#include <thread>

#include "gpumem/report/html/charts.h"
#include "gpumem/report/html/model_page.h"
#include "gpumem/report/html/report_file.h"
#include "gpumem/report/html/trace_page.h"
#include "gpumem/trace/lifetimes.h"

namespace gpumem::report {
namespace {

bool is_onnx(const std::string& path) {
  std::string lower = path;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  return lower.size() >= 5 && lower.compare(lower.size() - 5, 5, ".onnx") == 0;
}

}  // namespace

std::string report_html(const std::string& input, const HtmlRequest& request) {
  if (is_onnx(input)) {
    const InspectResult inspected = inspect_model(input, request.model);
    infer::PlanRequest plan_request;
    plan_request.model = request.model;
    plan_request.solve.time_limit_seconds = request.time_limit;
    const infer::PlanReport plan = infer::plan_file(input, plan_request);
    return model_html(inspected, &plan);
  }
  const trace::Trace t = trace::read_trace(input);
  trace::require_memory_events(t, /*history_needed=*/true);
  const trace::Lifetimes lifetimes = trace::extract_lifetimes(t, trace::busiest_device(t), /*strict=*/false);
  // The statistics and the replay read the same trace and lifetimes and
  // nothing else: they run side by side.
  trace::TraceStats stats;
  std::exception_ptr stats_failure;
  std::thread statistics([&] {
    try {
      stats = trace::trace_stats(t, lifetimes);
    } catch (...) {
      stats_failure = std::current_exception();
    }
  });
  trace::ReplayOptions options;
  options.optimal_time_limit = request.time_limit;
  options.timeline_columns = html::kHtmlColumns;
  trace::ReplayReport replay;
  try {
    replay = trace::replay(t, options);
  } catch (...) {
    statistics.join();
    throw;
  }
  statistics.join();
  if (stats_failure) std::rethrow_exception(stats_failure);
  return trace_html(t, &stats, &replay, &lifetimes);
}

}  // namespace gpumem::report
