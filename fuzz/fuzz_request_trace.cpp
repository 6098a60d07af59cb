// libFuzzer target: arbitrary bytes through serve-sim's request trace parser.
//
// The contract under test: parse_request_trace() returns requests numbered
// in order, arrivals non-decreasing, every length positive and within
// max_model_len, a prefix no longer than its prompt; or it throws
// gpumem::InputError with one line naming "fuzz.csv". Anything else
// aborts, as does any sanitizer report.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gpumem/common/error.h"
#include "gpumem/serve/request_trace.h"

#include "fuzz_check.h"

using gpumem::fuzz::check;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const auto requests = gpumem::serve::parse_request_trace(bytes, "fuzz.csv", 4096);
    check(!requests.empty());
    double previous = 0;
    for (std::size_t i = 0; i < requests.size(); ++i) {
      const auto& r = requests[i];
      check(r.id == i);
      check(r.arrival_s >= previous);
      previous = r.arrival_s;
      check(r.prompt_tokens >= 1 && r.output_tokens >= 1);
      check(std::uint64_t{r.prompt_tokens} + r.output_tokens <= 4096);
      check(r.prefix_tokens <= r.prompt_tokens);
      check(r.prefix_group >= -1);
    }
  } catch (const gpumem::InputError& e) {
    const std::string what = e.what();
    check(what.rfind("fuzz.csv", 0) == 0);
    check(what.find('\n') == std::string::npos);
  }
  return 0;
}
