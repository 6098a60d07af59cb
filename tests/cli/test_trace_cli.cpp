// `gpumem trace stats` and `gpumem replay` as users run them on real
// recorded traces: the figures they lead with, what they advise, and their
// exit codes.
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"
#include "test_paths.h"

namespace {

using gpumem::test::CliRun;
using gpumem::test::run;
using gpumem::test::trace_path;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

nlohmann::json json_of(const std::string& args) {
  const CliRun r = run(args + " --json");
  EXPECT_EQ(r.code, 0) << args << ": " << r.err;
  return nlohmann::json::parse(r.out);
}

// transformer_train.json was recorded after resnet18_train.json in the same
// process: the profiler's running total starts at the resnet's 85.31 MiB of
// gradients and momentum. stats counts it, replay cannot; the two figures
// have two names, and the text says which baseline each has.
TEST(CliTrace, TwoPeaksTwoNamesAndTheBaselineSaid) {
  const std::string t = trace_path("transformer_train.json");
  const auto stats = json_of("trace stats " + t);
  const auto replay = json_of("replay " + t + " --time-limit 0 --policy gpumem");
  const std::int64_t baseline = stats["baseline_bytes"];
  EXPECT_EQ(baseline, 89453136);
  EXPECT_EQ(replay["baseline_bytes"], baseline);
  EXPECT_EQ(stats["traced_peak_bytes"], replay["traced_peak_bytes"]);
  EXPECT_EQ(stats["traced_peak_event"], replay["traced_peak_event"]);
  EXPECT_GT(stats["peak_allocated_bytes"].get<std::int64_t>(), baseline);
  EXPECT_LT(stats["traced_peak_bytes"].get<std::int64_t>(), 1 << 20);
  EXPECT_FALSE(replay.contains("peak_allocated_bytes")) << "the name means the baseline-included peak in stats";
  EXPECT_EQ(replay["schema_version"], 2);

  const CliRun text = run("trace stats " + t);
  EXPECT_TRUE(contains(text.out, "Peak allocated: 85.61 MiB at event 638")) << text.out;
  EXPECT_TRUE(contains(text.out,
                       "  counting 85.31 MiB allocated before recording began (the source's running total "
                       "at its first event)\n"
                       "  the source's own largest running total: 85.61 MiB\n"
                       "Traced peak: 305.91 KiB at event 638, the trace's own allocations"))
      << text.out;
  const CliRun rtext = run("replay " + t + " --time-limit 0 --policy gpumem");
  EXPECT_TRUE(contains(rtext.out,
                       "Traced peak 305.91 KiB at event 638: the trace's own allocations, not counting the "
                       "85.31 MiB allocated before recording began"))
      << rtext.out;
  EXPECT_FALSE(contains(rtext.out, "Peak allocated")) << rtext.out;
}

// As `plan` exits 3 when nothing fits --gpu, so does replay when every
// policy runs out; one that fits is success.
TEST(CliTrace, ReplayExitsThreeWhenEveryPolicyRunsOut) {
  const std::string t = trace_path("resnet18_train.json");
  const CliRun none = run("replay " + t + " --time-limit 0 --policy gpumem --policy bfc --gpu 64MiB");
  EXPECT_EQ(none.code, 3) << none.err;
  EXPECT_TRUE(contains(none.out, "at event")) << none.out;
  // gpumem-expandable peaks at 106 MiB, pytorch at 130 MiB: one fits 110 MiB.
  const CliRun some = run("replay " + t + " --time-limit 0 --policy gpumem-expandable --policy pytorch --gpu 110MiB");
  EXPECT_EQ(some.code, 0) << some.err;
  EXPECT_TRUE(contains(some.out, "fits")) << some.out;
  const CliRun json = run("replay " + t + " --json --time-limit 0 --policy bfc --gpu 64MiB");
  EXPECT_EQ(json.code, 3);
  EXPECT_TRUE(nlohmann::json::parse(json.out)["policies"][0]["oom_at_event"].is_number());
}

}  // namespace

namespace {

// mlp_no_memory.json is what torch.profiler.profile() records by default:
// 105 operators, no [memory] event. An empty report with exit 0 hid that.
TEST(CliTrace, AProfilerTraceWithoutMemoryEventsSaysHowToRecordOne) {
  for (const char* command : {"trace stats ", "replay "}) {
    const CliRun r = run(command + trace_path("mlp_no_memory.json"));
    EXPECT_EQ(r.code, 2) << command;
    EXPECT_EQ(r.out, "") << command;
    EXPECT_EQ(r.err, "gpumem: error: " + trace_path("mlp_no_memory.json") +
                         ": no memory events: torch.profiler records allocations only when asked; record again with "
                         "torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], "
                         "profile_memory=True, record_shapes=True, with_stack=True) and export_chrome_trace()\n");
  }
}

}  // namespace

namespace {

// Two resnet18 SGD iterations (the second's step allocates more, with
// momentum) and three AdamW ones (the first allocates the optimizer's
// state): both were "no repetition found".
TEST(CliTrace, FindsTheIterationsOfRealTrainingTraces) {
  const CliRun sgd = run("trace stats " + trace_path("resnet18_train.json"));
  EXPECT_EQ(sgd.code, 0);
  EXPECT_TRUE(contains(sgd.out,
                       "Iterations: 2 complete; one iteration is 665 allocations (1,330 events, 175.16 MiB "
                       "allocated)\n  the first is 603 allocations, 62 fewer\n"
                       "  live at each one's lowest point: 0 B, 85.31 MiB\n"
                       "  a step: 85.31 MiB more after iteration 1, then flat\n"))
      << sgd.out;

  const std::string adamw = trace_path("resnet18_adamw_3iter.json.gz");
  const CliRun text = run("trace stats " + adamw);
  EXPECT_TRUE(contains(text.out,
                       "Iterations: 3 complete; one iteration is 1,409 allocations (2,818 events, 260.47 MiB "
                       "allocated)\n  the first is 1,595 allocations, 186 more: what it allocates once"))
      << text.out;
  const auto it = json_of("trace stats " + adamw)["iterations"];
  EXPECT_EQ(it["count"], 3);
  EXPECT_EQ(it["period_allocations"], 1409);
  EXPECT_EQ(it["first_iteration_allocations"], 1595);
  EXPECT_EQ(it["period_events"], 2818);
  // The first step makes the gradients, exp_avg and exp_avg_sq (3 x
  // 44,726,568 bytes) and 62 4-byte step counters, which stay: a step.
  EXPECT_EQ(it["shape"], "step");
  EXPECT_EQ(it["growth_bytes"], 3 * 44'726'568 + 62 * 4);
  ASSERT_EQ(it["live_bytes_at_trough"].size(), 3u);
  EXPECT_EQ(it["live_bytes_at_trough"][1], it["live_bytes_at_trough"][2]);
}

}  // namespace

namespace {

// What holds the memory at the peak, by operator: for resnet18_train.json
// the groups add up to the peak the profiler reported.
TEST(CliTrace, LiveAtThePeakAddsUpToThePeak) {
  const std::string t = trace_path("resnet18_train.json");
  const auto stats = json_of("trace stats " + t);
  std::int64_t sum = stats["live_at_peak"]["baseline_bytes"];
  for (const auto& g : stats["live_at_peak"]["by_context"]) sum += g["bytes"].get<std::int64_t>();
  EXPECT_EQ(sum, stats["peak_allocated_bytes"]);
  EXPECT_EQ(stats["live_at_peak"]["by_context"][0]["context"], "aten::empty");
  const auto replay = json_of("replay " + t + " --time-limit 0 --policy gpumem");
  EXPECT_EQ(replay["live_at_peak"], stats["live_at_peak"]["by_context"]);
  const CliRun text = run("replay " + t + " --time-limit 0 --policy gpumem");
  EXPECT_TRUE(contains(text.out,
                       "Live at the peak, by operator or stack (largest first, up to 10):\n"
                       "     52.41 MiB in      136  aten::empty\n"
                       "     42.65 MiB in       63  aten::empty_strided\n"))
      << text.out;
}

// Recorded with with_stack=True: torch.profiler's python_function spans give
// the user's frame (torch's own frames are skipped) next to the operator.
TEST(CliTrace, PythonFramesOfAStackTraceNameTheUsersCode) {
  const CliRun r = run("trace stats " + trace_path("resnet18_adamw_3iter.json.gz"));
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(contains(r.out,
                       "Live at the peak, by operator or stack (largest first, up to 10):\n"
                       "     85.31 MiB in      125  aten::empty_strided in step (record_trace.py:186)\n"
                       "     51.64 MiB in      125  aten::empty in step (record_trace.py:186)\n"))
      << r.out;
  EXPECT_TRUE(contains(r.out, "aten::empty in nn.Module: BatchNorm2d_0\n")) << r.out;
  EXPECT_TRUE(contains(r.out,
                       "Never freed: 248 allocations, 127.96 MiB\n"
                       "     85.31 MiB in      124  aten::empty_strided in step (record_trace.py:186)\n"))
      << r.out;
}

}  // namespace

namespace {

// After the table, one line per policy that beats PyTorch's defaults (what
// a profiler trace was recorded under), with the setting that selects it
// and what it saves; with --gpu, the ones that fit where it runs out.
TEST(CliTrace, ReplayAdvisesTheSettingsThatDoBetter) {
  const std::string t = trace_path("resnet18_train.json");
  const CliRun r = run("replay " + t + " --time-limit 0");
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(contains(r.out,
                       "Advice against pytorch (PyTorch's defaults: PYTORCH_CUDA_ALLOC_CONF unset), the policy the "
                       "trace was recorded under (--current says otherwise):\n"
                       "  gpumem's allocator in PyTorch with GPUMEM_ALLOC_CONF=expandable_segments:true would have "
                       "saved 24.00 MiB at the peak (106.00 MiB reserved, not 130.00 MiB)\n"
                       "  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True would have saved 22.00 MiB at the peak "
                       "(108.00 MiB reserved, not 130.00 MiB)\n"
                       "  gpumem's allocator in PyTorch (libgpumem_torch.so as a CUDAPluggableAllocator) would have "
                       "saved 14.00 MiB at the peak (116.00 MiB reserved, not 130.00 MiB)\n\n"))
      << r.out;
  // BFC (126 MiB) is TensorFlow's: no PyTorch setting selects it.
  EXPECT_FALSE(contains(r.out, "TF_FORCE_GPU_ALLOW_GROWTH")) << r.out;

  const auto doc = json_of("replay " + t + " --time-limit 0 --gpu 120MiB");
  EXPECT_EQ(doc["current_policy"], "pytorch");
  ASSERT_EQ(doc["advice"].size(), 4u);
  EXPECT_EQ(doc["advice"][0]["policy"], "gpumem-expandable");
  EXPECT_EQ(doc["advice"][0]["fits_where_current_does_not"], true);
  EXPECT_EQ(doc["advice"][1]["setting"], "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");

  const CliRun best = run("replay " + t + " --time-limit 0 --current gpumem-expandable");
  EXPECT_TRUE(contains(best.out, "Advice: no policy replayed does better than gpumem-expandable")) << best.out;
  const CliRun bad = run("replay " + t + " --time-limit 0 --current tcmalloc");
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(contains(bad.err, "unknown policy 'tcmalloc'")) << bad.err;
}

}  // namespace

namespace {

// A profiler trace's host memory is device -1; the snapshot format numbers
// devices from 0, and reading gpumem's own snapshot back gave device 0.
TEST(CliTrace, HostMemoryStaysDeviceMinusOneThroughASnapshot) {
  const std::string snapshot = gpumem::test::write_temp("host.pickle", "");
  const CliRun to = run("trace convert " + trace_path("resnet18_train.json") + " --to pytorch -o " + snapshot);
  ASSERT_EQ(to.code, 0) << to.err;
  const auto back = json_of("trace stats " + snapshot);
  EXPECT_EQ(back["device"], -1);
  EXPECT_EQ(back["allocations"], 1268);
  const std::string history = gpumem::test::write_temp("host.jsonl", "");
  const CliRun again = run("trace convert " + snapshot + " --to jsonl -o " + history);
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(json_of("trace stats " + history)["device"], -1);
  EXPECT_EQ(json_of("replay " + snapshot + " --time-limit 0 --policy gpumem")["device"], -1);
}

}  // namespace

namespace {

// snapshot_oom.pickle (tools/make_snapshot_fixtures.py, the fields of
// torch.cuda.memory._snapshot()): a 12 MiB request fails with 40 MiB
// reserved, 20 MiB allocated and no free block over 10 MiB. It said "oom 1".
TEST(CliTrace, AnOutOfMemorySnapshotSaysWhatFailedAndWhy) {
  const std::string t = trace_path("snapshot_oom.pickle");
  const CliRun r = run("trace stats " + t);
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(contains(r.out,
                       "Out of memory at event 11 (0.011 ms into the trace): tried to allocate 12.00 MiB with 3.00 MiB "
                       "free on the device\n"
                       "  then: reserved 40.00 MiB, allocated 20.00 MiB; 20.00 MiB reserved but unallocated, the "
                       "largest free block 10.00 MiB\n"
                       "  the request came from train_step (/home/user/train.py:42)\n"
                       "  fragmentation: the reserved but unallocated memory would hold the request, no free block "
                       "does; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets free memory join"))
      << r.out;
  const auto oom = json_of("trace stats " + t)["out_of_memory"];
  ASSERT_EQ(oom.size(), 1u);
  EXPECT_EQ(oom[0]["requested_bytes"], 12 << 20);
  EXPECT_EQ(oom[0]["device_free_bytes"], 3 << 20);
  EXPECT_EQ(oom[0]["reserved_bytes"], 40 << 20);
  EXPECT_EQ(oom[0]["allocated_bytes"], 20 << 20);
  EXPECT_EQ(oom[0]["largest_free_block_bytes"], 10 << 20);
}

// The same allocator state without history: it said "0 events ... Peak
// allocated 0 B"; the segments say what was allocated.
TEST(CliTrace, ASnapshotWithoutHistoryReportsItsSegments) {
  const std::string t = trace_path("snapshot_no_history.pickle");
  const CliRun r = run("trace stats " + t);
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "Trace " + t +
                       " (pytorch-snapshot): 0 events, device 0\n"
                       "No allocation history: the snapshot was taken without "
                       "torch.cuda.memory._record_memory_history(); its segments describe the memory allocated when "
                       "it was taken\n"
                       "At the snapshot: 2 segments, reserved 40.00 MiB, allocated 20.00 MiB\n"
                       "  fragmentation 50.0% (reserved but not allocated), the largest free block 10.00 MiB\n"
                       "Live at the snapshot, by stack (largest first, up to 10):\n"
                       "     12.00 MiB in        2  train_step (/home/user/train.py:42)\n"
                       "      8.00 MiB in        1  make_buffer (/home/user/model.py:7)\n");
  const auto seg = json_of("trace stats " + t)["segments"];
  EXPECT_EQ(seg["reserved_bytes"], 40 << 20);
  EXPECT_EQ(seg["allocated_bytes"], 20 << 20);
  EXPECT_EQ(seg["largest_free_block_bytes"], 10 << 20);
  EXPECT_EQ(seg["fragmentation"], 0.5);
  const CliRun replay = run("replay " + t);
  EXPECT_EQ(replay.code, 2);
  EXPECT_TRUE(contains(replay.err, "no allocation history to replay")) << replay.err;
}

}  // namespace

namespace {

// A snapshot whose segments are expandable was taken from a job that ran
// with expandable_segments:True: advice compares against that.
TEST(CliTrace, AdviceStartsFromTheSnapshotsOwnSetting) {
  EXPECT_EQ(json_of("replay " + trace_path("snapshot_p4.pickle") + " --time-limit 0")["current_policy"],
            "pytorch-expandable");
  EXPECT_EQ(json_of("replay " + trace_path("snapshot_oom.pickle") + " --time-limit 0")["current_policy"], "pytorch");
}

}  // namespace

namespace gpumem::test {
namespace {

TEST(CliTracePlan, WritesTheLastIterationsPlanOrSaysWhyNot) {
  const std::string out = testing::TempDir() + std::to_string(getpid()) + "_plan.json";
  CliRun r = run("trace plan " + trace_path("resnet18_adamw_3iter.json.gz") + " -o " + out + " --time-limit 2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("Plan of iteration 3 of 3: 1409 requests, 1409 from the arena; arena 18.88 MiB", 0), 0u)
      << r.out;
  EXPECT_EQ(read_file_bytes(out).rfind("{\"format\":\"gpumem-iteration-plan\",\"version\":2,", 0), 0u);
  r = run("trace plan " + trace_path("rmm_sample.csv") + " -o " + out + ".none");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no repeating iterations found"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1);
}

}  // namespace
}  // namespace gpumem::test

namespace {

std::string temp_file(const std::string& name) {
  return testing::TempDir() + "gpumem_trace_cli_" + std::to_string(getpid()) + "_" + name;
}

// Issue 30: a file gpumem wrote keeps where it came from. A Perfetto
// timeline is a picture: reading it back says so instead of telling the
// user to record again with torch.profiler.
TEST(CliTraceOrigins, APerfettoTimelineGpumemWroteSaysWhatItIs) {
  const std::string timeline = temp_file("timeline.json");
  ASSERT_EQ(run("trace convert " + trace_path("resnet18_train.json") + " --to perfetto -o " + timeline).code, 0);
  const CliRun back = run("trace stats " + timeline);
  EXPECT_EQ(back.code, 2);
  EXPECT_TRUE(contains(back.err, timeline + ": a Perfetto timeline gpumem wrote for viewing")) << back.err;
  EXPECT_FALSE(contains(back.err, "torch.profiler")) << back.err;
}

// A PyTorch trace converted to a gpumem history, and a step `train --trace`
// predicted for PyTorch's allocator, are still compared against PyTorch's
// policy, not against gpumem's, unless --current says otherwise.
TEST(CliTraceOrigins, ConvertedAndPredictedTracesKeepTheirAllocator) {
  const std::string history = temp_file("history.jsonl");
  ASSERT_EQ(run("trace convert " + trace_path("resnet18_train.json") + " --to jsonl -o " + history).code, 0);
  EXPECT_EQ(json_of("replay " + history + " --time-limit 0")["current_policy"], "pytorch");

  const std::string step = temp_file("step.jsonl");
  const std::string model = (gpumem::test::source_dir() / "tests/data/train/resnet18_sgd.onnx").string();
  const CliRun train = run("train " + model + " --device cpu --optimizer sgd-momentum --trace " + step);
  ASSERT_EQ(train.code, 0) << train.err;
  EXPECT_TRUE(contains(train.err, "gpumem: wrote " + step + " (gpumem trace of the step, ")) << train.err;
  EXPECT_EQ(json_of("replay " + step + " --time-limit 0")["current_policy"], "pytorch");
  const CliRun gpumem = run("train " + model + " --optimizer sgd-momentum --allocator gpumem --trace " + step);
  ASSERT_EQ(gpumem.code, 0) << gpumem.err;
  EXPECT_EQ(json_of("replay " + step + " --time-limit 0")["current_policy"], "gpumem");
}

// Every policy replay can advise has the setting that selects it.
TEST(CliTraceOrigins, PlannedModeAdviceNamesItsSetting) {
  const auto doc = json_of("replay " + trace_path("resnet18_adamw_3iter.json.gz") +
                           " --time-limit 0 --policy pytorch,gpumem-planned");
  bool planned = false;
  for (const auto& a : doc["advice"]) {
    EXPECT_FALSE(a["setting"].get<std::string>().empty()) << a;
    planned = planned || a["policy"] == "gpumem-planned";
  }
  EXPECT_TRUE(planned) << doc["advice"];
}

// An RMM log has no segments: at an out-of-memory, what was allocated is
// known and reserved is not, and the report says so rather than "0 B
// reserved at the snapshot".
TEST(CliTraceOrigins, AnRmmOutOfMemorySaysWhatTheLogKnows) {
  const std::string log = temp_file("rmm_oom.csv");
  {
    std::ofstream out(log);
    out << "Thread,Time,Action,Pointer,Size,Stream\n"
           "1,00:00:00.000100,allocate,0x7f0000000000,1048576,0x0\n"
           "1,00:00:00.000200,allocate,0x7f0000100000,2097152,0x0\n"
           "1,00:00:00.000300,allocate failure,0x0,8589934592,0x0\n";
  }
  const CliRun r = run("trace stats " + log);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(
      contains(r.out, "then: allocated 3.00 MiB (the trace records no segments, so reserved memory is unknown)"))
      << r.out;
  EXPECT_FALSE(contains(r.out, "at the snapshot")) << r.out;
  const auto doc = json_of("trace stats " + log);
  ASSERT_EQ(doc["out_of_memory"].size(), 1u);
  EXPECT_EQ(doc["out_of_memory"][0]["reserved_known"], false);
  EXPECT_EQ(doc["out_of_memory"][0]["allocated_bytes"], 3u << 20);
}

}  // namespace
