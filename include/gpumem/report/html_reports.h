#pragma once
// Each analysis as a self-contained HTML page (gpumem/report/html.h): what
// `gpumem report` and every command's --html write.
#include <string>

#include "gpumem/model/inspect.h"
#include "gpumem/plan/planner.h"
#include "gpumem/trace/replay.h"
#include "gpumem/trace/trace.h"
#include "gpumem/trace/trace_stats.h"
#include "gpumem/train/training_step.h"

namespace gpumem::report {

// How many columns line charts keep (about one per pixel of a wide
// screen), and how many rectangles an arena picture draws one by one.
inline constexpr std::size_t kHtmlColumns = 1200;
inline constexpr std::size_t kHtmlMaxRects = 2000;

// A model: live activation bytes over the node order with the peak, the
// largest activations, and, with a plan, the arena (time x offset).
std::string model_html(const InspectResult& inspected, const plan::PlanReport* plan);
// A plan alone (a MiniMalloc CSV, or a model's): the arena and its figures.
std::string plan_html(const plan::PlanReport& plan);
// A trace: allocated bytes over time, what stayed, the iterations; with a
// replay (made with ReplayOptions::timeline_columns), each policy's reserved
// bytes and the optimal arena as a picture. `lifetimes`, when given, are
// the trace's on the device reported (else they are extracted again).
std::string trace_html(const trace::Trace& trace, const trace::TraceStats* stats, const trace::ReplayReport* replay,
                       const trace::Lifetimes* lifetimes = nullptr);
// A training step: live bytes stacked by what they are, across the phases.
std::string train_html(const train::TrainingStep& step);

// `gpumem report INPUT`: an ONNX model gets the model page with its plan
// (the planner given `time_limit` seconds); anything else is read as a trace
// and gets the trace page with its statistics and a replay of every policy.
// Throws InputError for what cannot be read.
struct HtmlRequest {
  InspectOptions model;     // --batch, --dim, --dtype
  double time_limit = 5.0;  // seconds for the planner (0: heuristics only)
};
std::string report_html(const std::string& input, const HtmlRequest& request);

}  // namespace gpumem::report
