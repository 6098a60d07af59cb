// libFuzzer target: arbitrary bytes as an iteration plan file (what
// `gpumem trace plan` writes and gpumem_use_plan_file reads).
//
// The contract under test: iteration_plan_from_json() either returns a plan
// whose every offset is -1 or an aligned range inside its arena, or throws
// gpumem::InputError with one line; a planned allocator serving that plan
// never hands out overlapping blocks.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>

#include "gpumem/alloc/planned_allocator.h"
#include "gpumem/alloc/simulated_device.h"
#include "gpumem/common/error.h"

#include "fuzz_check.h"

using gpumem::fuzz::check;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpumem::alloc;
  const std::string text(reinterpret_cast<const char*>(data), size);
  IterationPlan plan;
  try {
    plan = iteration_plan_from_json(text, "fuzz.json");
  } catch (const gpumem::InputError& e) {
    gpumem::fuzz::check_one_line(e);
    return 0;
  }
  check(plan.sizes.size() == plan.offsets.size());
  for (std::size_t k = 0; k < plan.sizes.size(); ++k) {
    check(plan.sizes[k] > 0);
    check(plan.offsets[k] == -1 ||
          (plan.offsets[k] % 512 == 0 && static_cast<std::size_t>(plan.offsets[k]) + plan.sizes[k] <= plan.arena));
  }
  if (plan.arena > (std::size_t{1} << 32) || plan.sizes.size() > 4096) return 0;  // keep runs short
  // Serve the plan's own requests, all live at once: no two may overlap.
  SimulatedDevice device({.capacity = std::size_t{1} << 40});
  PlannedAllocator a(simulated_upstream(device));
  a.use_plan(plan);
  a.step();
  std::map<std::uintptr_t, std::uintptr_t> live;
  std::vector<std::pair<void*, std::size_t>> blocks;
  for (std::size_t bytes : plan.sizes) {
    void* p = a.allocate(bytes);
    const auto at = reinterpret_cast<std::uintptr_t>(p);
    auto next = live.lower_bound(at);
    check(next == live.end() || next->first >= at + bytes);
    check(next == live.begin() || std::prev(next)->second <= at);
    live[at] = at + bytes;
    blocks.emplace_back(p, bytes);
  }
  for (auto [p, bytes] : blocks) a.deallocate(p, bytes);
  return 0;
}
