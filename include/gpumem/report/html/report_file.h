#pragma once
// `gpumem report INPUT`: which page an input gets, and the analyses behind it.
#include <string>

#include "gpumem/model/inspect.h"

namespace gpumem::report {

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
