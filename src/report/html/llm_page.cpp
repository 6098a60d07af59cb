// The page of `llm --html`: the text report's verdict, what the GPU holds and
// the quantization levels, with the request and the engine.
#include <fmt/format.h>

#include "gpumem/common/units.h"
#include "gpumem/report/html/document.h"
#include "gpumem/report/html/train_page.h"
#include "report/html/summary_section.h"

namespace gpumem::report {

std::string llm_html(const llm::LlmPlan& plan) {
  const auto& m = plan.model;
  const auto& r = plan.request;
  html::Document doc("Serving " + m.source);
  doc.facts({{"model", fmt::format("{} ({}, {}), {} parameters", m.source, m.format, m.architecture,
                                   format_count(m.parameters()))},
             {"request", fmt::format("{} tokens x {} sequence(s), {} x {}", format_count(plan.context), r.batch, r.gpus,
                                     format_bytes(r.gpu_bytes))},
             {"engine", fmt::format("{} {}", r.engine.name, r.engine.version)},
             {"weights, all of them", format_bytes(m.weight_bytes())}});
  html::summary_section(doc, llm_summary(plan));
  return doc.html();
}

}  // namespace gpumem::report
