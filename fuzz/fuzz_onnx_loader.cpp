// libFuzzer target: arbitrary bytes through the ONNX loader (parse, structure
// checks, shape inference, constant folding) and the memory analysis.
//
// The contract under test: load_onnx_model_from_bytes either returns a model
// or throws gpumem::InputError. Any other exception escapes to libFuzzer (an
// uncaught exception aborts: a crash), as does any sanitizer report, and an
// input that takes more than a second is a bug too.
//
// Roughly half the inputs are loaded with --batch bound, chosen by a hash of
// the bytes so a replay of one file always takes the same path; some of those
// with an absurd batch, which must be rejected with InputError rather than
// allocated.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gpumem/common/error.h"
#include "gpumem/model/memory_analysis.h"
#include "gpumem/model/onnx_loader.h"

namespace {

uint32_t fnv1a(const uint8_t* data, size_t size) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 16777619u;
  return h;
}

gpumem::LoadOptions options_for(const uint8_t* data, size_t size) {
  gpumem::LoadOptions options;
  const uint32_t h = fnv1a(data, size);
  if (h & 1u) options.batch = (h & 0x6u) == 0x6u ? int64_t{1} << 40 : 2;
  return options;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  gpumem::Model model;
  try {
    model = gpumem::load_onnx_model_from_bytes(bytes, "fuzz.onnx", options_for(data, size));
  } catch (const gpumem::InputError&) {
    return 0;  // rejected with a message: the expected outcome for bad input
  }
  const gpumem::MemoryAnalysis analysis = gpumem::analyze_memory(model.graph);
  // Re-priced as converted models, as --dtype does.
  gpumem::PricingOptions pricing;
  pricing.weights_as = gpumem::DType::Float16;
  pricing.activations_as = gpumem::DType::Int4;
  const gpumem::MemoryAnalysis repriced = gpumem::analyze_memory(model.graph, pricing);
  (void)analysis.lower_bound();
  (void)repriced.lower_bound();
  return 0;
}

// Sanitizer reports with a stack, and every UB report is fatal.
extern "C" const char* __ubsan_default_options() { return "print_stacktrace=1:halt_on_error=1"; }
