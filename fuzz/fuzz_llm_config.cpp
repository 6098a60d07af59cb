// libFuzzer target: arbitrary bytes as a Hugging Face config.json through
// gpumem llm's reader and planner.
//
// The contract under test: model_from_hf_config() and plan_llm() either
// answer, with a total that is the sum of its parts and a verdict that
// agrees with it, or throw gpumem::InputError with one line. Anything else
// aborts, as does any sanitizer report (an overflow in a size included).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "gpumem/common/error.h"
#include "gpumem/llm/llm_fit.h"

#include "fuzz_check.h"

using gpumem::fuzz::check;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    gpumem::llm::LlmRequest request;
    request.gpu_bytes = 24ull << 30;
    request.context = 4096;
    const gpumem::llm::LlmPlan p =
        gpumem::llm::plan_llm(gpumem::llm::model_from_hf_config(text, "fuzz/config.json"), request);
    const auto& g = p.single;
    check(g.total() == g.weights_bytes + g.kv_bytes + g.activation_bytes + g.overhead_bytes);
    check(g.weights_bytes == p.model.weight_bytes());
    // The verdict is on what the GPU holds under the engine's placement
    // (the token embeddings in host memory), never more than everything.
    check(p.verdict.device_bytes == p.placed.total() && p.placed.total() <= g.total());
    check(p.verdict.fits() == (p.placed.total() <= request.gpu_bytes));
    check(p.max_batch == 0 || p.verdict.fits() || p.max_batch < request.batch);
    check(p.offload.gpu.total() <= request.gpu_bytes || !p.offload.fits);
  } catch (const gpumem::InputError& e) {
    gpumem::fuzz::check_one_line(e);
  }
  return 0;
}
