#pragma once
// The pages of the commands whose report is tables: `weights`, `quantize`,
// `serve-sim`, `explain-oom` and `llm --engine vllm` (--html). Each shows what its text
// report shows, from the same rows.
#include <string>
#include <vector>

#include "gpumem/llm/vllm_sizing.h"
#include "gpumem/oom/oom_message.h"
#include "gpumem/serve/simulator.h"
#include "gpumem/weights/quantize_file.h"
#include "gpumem/weights/weight_summary.h"

namespace gpumem::report {

std::string weights_html(const weights::WeightSummary& summary, int top = 10);
std::string serve_html(const serve::ServeSimulation& sim);
std::string oom_html(const oom::OomExplanation& explanation);
std::string quantize_html(const weights::QuantizeReport& report);
std::string vllm_html(const llm::LlmModel& model, const llm::VllmSizing& sizing,
                      const std::vector<llm::VllmQuantLevel>& levels);

}  // namespace gpumem::report
