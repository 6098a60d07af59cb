#pragma once
// The page of a model and the page of a plan (the HTML of `inspect --html`,
// `plan --html` and `report MODEL`), drawn with html/document.h.
#include <string>

#include "gpumem/infer/planner.h"
#include "gpumem/model/inspect.h"

namespace gpumem::report {

// A model: live activation bytes over the node order with the peak, the
// largest activations, and, with a plan, the arena (time x offset).
std::string model_html(const InspectResult& inspected, const infer::PlanReport* plan);
// A plan alone (a MiniMalloc CSV, or a model's): the arena and its figures.
std::string plan_html(const infer::PlanReport& plan);

}  // namespace gpumem::report
