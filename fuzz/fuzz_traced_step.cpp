// libFuzzer target: arbitrary bytes as a gpumem-step document (a training
// step traced by gpumem.torch.estimate) through `gpumem train`'s reader, its
// summary and the device replay.
//
// The contract under test: parse_traced_step() either gives a step whose
// peak is the sum of its breakdown, whose timeline stays within the step
// and whose device figure is at least its allocated peak, or throws
// gpumem::InputError with one line. Anything else aborts, as does any
// sanitizer report.
#include <cstddef>
#include <cstdint>
#include <string>

#include "gpumem/common/error.h"
#include "gpumem/train/device_memory.h"
#include "gpumem/train/traced_step.h"

#include "fuzz_check.h"

using gpumem::fuzz::check;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const gpumem::train::TrainingStep s =
        gpumem::train::parse_traced_step(text, "fuzz/step.json", gpumem::train::TrainOptions{});
    uint64_t sum = 0;
    for (uint64_t b : s.breakdown) sum += b;
    check(sum == s.peak_bytes);
    check(static_cast<int>(s.timeline.size()) == s.end_time);
    check(s.peak_time >= 0 && s.peak_time < s.end_time);
    // Small steps only: the replay's cost grows with the bytes' spread.
    if (s.allocations.size() < 2000) {
      const auto device = gpumem::train::device_memory(s);
      check(device.reserved_peak >= s.peak_bytes);
    }
  } catch (const gpumem::InputError& e) {
    gpumem::fuzz::check_one_line(e);
  }
  return 0;
}
