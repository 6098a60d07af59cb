// The policy table (alloc/policies/policy_registry.h) is the one place a
// policy is described: every row must make a working allocator and say how
// a user selects it, and every name other tables use must be one of its rows.
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "gpumem/alloc/policies/policy_registry.h"
#include "gpumem/alloc/policies/policy_run.h"
#include "gpumem/common/error.h"
#include "gpumem/trace/formats.h"

namespace gpumem::alloc {
namespace {

// Three iterations of the same three allocations, the middle one freed first.
AllocationSequence loop() {
  AllocationSequence seq;
  for (int iteration = 0; iteration < 3; ++iteration) {
    const auto base = static_cast<std::uint32_t>(seq.sizes.size());
    for (std::size_t bytes : {std::size_t{1} << 20, std::size_t{3} << 20, std::size_t{512}}) seq.sizes.push_back(bytes);
    for (std::uint32_t i = 0; i < 3; ++i) seq.steps.push_back({base + i, false, seq.steps.size()});
    for (std::uint32_t i : {1u, 0u, 2u}) seq.steps.push_back({base + i, true, seq.steps.size()});
  }
  seq.positions = seq.steps.size();
  return seq;
}

TEST(PolicyRegistry, EveryRowMakesAnAllocatorThatRunsALoop) {
  const AllocationSequence seq = loop();
  const std::vector<std::size_t> starts = {0, 3, 6};
  std::set<std::string> names;
  for (const PolicyEntry& p : policy_registry()) {
    EXPECT_TRUE(names.insert(p.name).second) << p.name << " twice";
    EXPECT_NE(std::string(p.setting), "") << p.name;
    EXPECT_EQ(p.iteration_begins == nullptr, p.plan_counts == nullptr) << p.name;
    const PolicyRun run = run_policy(p, seq, {.iteration_starts = &starts});
    EXPECT_EQ(run.name, p.name);
    EXPECT_FALSE(run.oom_at_event.has_value()) << p.name << ": " << run.oom_message;
    // Never less than the most live at once (4 MiB and 512 bytes).
    EXPECT_GE(run.peak_reserved, (std::int64_t{4} << 20) + 512) << p.name;
    EXPECT_GE(run.steady_peak_reserved, 0) << p.name;
    EXPECT_EQ(run.plan.has_value(), p.plan_counts != nullptr) << p.name;
  }
}

TEST(PolicyRegistry, ACapacityTooSmallRunsOutAtThatAllocation) {
  const AllocationSequence seq = loop();
  for (const PolicyEntry& p : policy_registry()) {
    const PolicyRun run = run_policy(p, seq, {.capacity = std::size_t{2} << 20});
    ASSERT_TRUE(run.oom_at_event.has_value()) << p.name;
    EXPECT_EQ(*run.oom_at_event, 1u) << p.name;  // the 3 MiB one
    EXPECT_FALSE(run.oom_message.empty()) << p.name;
  }
}

TEST(PolicyRegistry, TheOtherTablesNameItsRows) {
  const PolicyEntry& training = training_default_policy();
  EXPECT_TRUE(training.for_training_steps);
  int defaults = 0;
  for (const PolicyEntry& p : policy_registry()) defaults += p.training_default;
  EXPECT_EQ(defaults, 1);
  // The policy each trace format records must be one replay can run.
  for (const trace::TraceFormat& f : trace::trace_formats())
    if (*f.recorded_under) EXPECT_NE(find_policy(f.recorded_under), nullptr) << f.name;
  EXPECT_NE(find_policy("pytorch-expandable"), nullptr);  // what an expandable snapshot records
}

TEST(PolicyRegistry, AnUnknownNameIsOneLineNamingTheKnownOnes) {
  try {
    policy_named("tcmalloc", "--allocator");
    FAIL() << "no error";
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind("--allocator: unknown policy 'tcmalloc' (known: gpumem, ", 0), 0u) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos);
  }
}

}  // namespace
}  // namespace gpumem::alloc
