// Trace readers and writers: torch.profiler Chrome traces (real ones,
// recorded by tools/record_trace.py), RMM logs, gpumem's allocator history,
// MiniMalloc CSV, and the Perfetto writer; then damaged input of each.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gpumem/alloc/caching_allocator.h"
#include "gpumem/alloc/simulated_device.h"
#include "gpumem/common/error.h"
#include "gpumem/trace/chrome_trace_reader.h"
#include "gpumem/trace/formats.h"
#include "gpumem/trace/history_format.h"
#include "gpumem/trace/lifetimes.h"
#include "gpumem/trace/minimalloc_csv.h"
#include "gpumem/trace/perfetto_writer.h"
#include "gpumem/trace/rmm_log.h"
#include "gpumem/trace/trace_stats.h"
#include "test_paths.h"

namespace gpumem::trace {
namespace {

std::string trace_path(const std::string& name) { return (test::source_dir() / "tests/data/traces" / name).string(); }

std::string tag_of(const Trace& t, const Event& e) { return t.contexts.at(e.context).tag; }

// Expects an InputError whose message contains every part.
template <typename F>
void expect_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no InputError";
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    for (const std::string& part : parts) EXPECT_NE(message.find(part), std::string::npos) << message;
  }
}

// The profiler's "Total Allocated" after each event is the first event's
// total before it (the baseline) plus the Bytes of every event so far.
void expect_running_totals(const Trace& t) {
  ASSERT_FALSE(t.events.empty());
  const Event& first = t.events.front();
  std::int64_t total = first.total_allocated - (first.action == Action::kAlloc ? first.size : -first.size);
  std::unordered_map<std::uint64_t, std::int64_t> live;
  std::size_t unknown_frees = 0;
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const Event& e = t.events[i];
    if (e.action == Action::kAlloc) {
      total += e.size;
      live[e.address] = e.size;
    } else {
      total -= e.size;
      auto it = live.find(e.address);
      if (it == live.end())
        ++unknown_frees;
      else {
        EXPECT_EQ(it->second, e.size) << "event " << i;
        live.erase(it);
      }
    }
    ASSERT_EQ(total, e.total_allocated) << "event " << i;
  }
  EXPECT_EQ(unknown_frees, 0u);  // so "allocs minus frees of known addresses" is the same sum
}

// --- torch.profiler Chrome traces: real recordings ---------------------------

TEST(ChromeTrace, RealResnetTrainingTrace) {
  const Trace t = read_trace(trace_path("resnet18_train.json"));
  EXPECT_EQ(t.format, "chrome-trace");
  EXPECT_TRUE(t.warnings.empty());
  EXPECT_EQ(t.skipped_records, 0u);
  ASSERT_EQ(t.events.size(), 2412u);
  // The first and last [memory] events of the file, exactly (ts was
  // 1796062679695603.586 us: 19 digits, more than a double holds).
  const Event& first = t.events.front();
  EXPECT_EQ(first.action, Action::kAlloc);
  EXPECT_EQ(first.address, 950263168u);
  EXPECT_EQ(first.size, 4);
  EXPECT_EQ(first.time_ns, 1796062679695603586);
  EXPECT_EQ(first.total_allocated, 4);
  EXPECT_EQ(first.total_reserved, 0);
  EXPECT_EQ(first.device, -1);  // CPU memory
  const Event& last = t.events.back();
  EXPECT_EQ(last.action, Action::kFreeCompleted);
  EXPECT_EQ(last.address, 970133312u);
  EXPECT_EQ(last.size, 4);
  EXPECT_EQ(last.time_ns, 1796062680016846647);
  EXPECT_EQ(last.total_allocated, 89453136);  // gradients and momentum buffers stay
  EXPECT_TRUE(std::is_sorted(t.events.begin(), t.events.end(),
                             [](const Event& a, const Event& b) { return a.time_ns < b.time_ns; }));
  std::size_t allocs = 0;
  for (const Event& e : t.events) {
    EXPECT_EQ(e.device, -1);
    allocs += e.action == Action::kAlloc;
  }
  EXPECT_EQ(allocs, 1268u);
  expect_running_totals(t);

  // Tags: the innermost cpu_op enclosing each event, counted independently
  // (a brute force over the file's spans, in Python).
  std::map<std::string, std::size_t> tags;
  for (const Event& e : t.events) ++tags[tag_of(t, e)];
  EXPECT_EQ(tags["aten::empty"], 586u);
  EXPECT_EQ(tags["aten::convolution_backward"], 488u);
  EXPECT_EQ(tags["aten::mkldnn_convolution"], 248u);  // conv2d's output, inside aten::conv2d
  EXPECT_EQ(tags["aten::native_batch_norm"], 170u);
  EXPECT_EQ(tags[""], 224u);  // frees after their operator returned
  EXPECT_EQ(tags.size(), 31u);

  const Lifetimes l = extract_lifetimes(t, busiest_device(t), true);
  EXPECT_EQ(l.device, -1);
  EXPECT_EQ(l.anomalies.total(), 0u);
  EXPECT_EQ(l.baseline, 0);
  const TraceStats s = trace_stats(t, l);
  EXPECT_EQ(s.peak_allocated, 109246552);
  EXPECT_EQ(s.source_peak_allocated, 109246552);
  EXPECT_EQ(s.peak_event, 1561u);
}

TEST(ChromeTrace, RealTransformerTraceStartsFromAnEarlierSessionsMemory) {
  // Recorded right after the resnet in the same process: the profiler's
  // total still counts the resnet's 89,453,136 bytes, freed while it was off.
  const Trace t = read_trace(trace_path("transformer_train.json"));
  ASSERT_EQ(t.events.size(), 1060u);
  EXPECT_EQ(t.events.front().total_allocated - t.events.front().size, 89453136);
  expect_running_totals(t);
  const Lifetimes l = extract_lifetimes(t, -1, true);
  EXPECT_EQ(l.baseline, 89453136);
  EXPECT_EQ(trace_stats(t, l).peak_allocated, 89766392);
  std::map<std::string, std::size_t> tags;
  for (const Event& e : t.events) ++tags[tag_of(t, e)];
  EXPECT_EQ(tags["aten::empty_strided"], 182u);
  EXPECT_EQ(tags["aten::div"], 64u);
  EXPECT_EQ(tags[""], 370u);
  EXPECT_EQ(tags.size(), 38u);
}

// --- Chrome traces: the format's corners ----------------------------------

std::string memory_event(const std::string& ts, std::int64_t bytes, std::uint64_t addr, int tid = 1,
                         std::int64_t total = 0, int device_type = 1, int device_id = 0) {
  return R"({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 7, "tid": )" +
         std::to_string(tid) + R"(, "ts": )" + ts + R"(, "args": {"Total Reserved": 4096, "Total Allocated": )" +
         std::to_string(total) + R"(, "Bytes": )" + std::to_string(bytes) + R"(, "Addr": )" + std::to_string(addr) +
         R"(, "Device Id": )" + std::to_string(device_id) + R"(, "Device Type": )" + std::to_string(device_type) + "}}";
}
std::string op(const std::string& name, const std::string& ts, const std::string& dur, int tid = 1) {
  return R"({"ph": "X", "cat": "cpu_op", "name": ")" + name + R"(", "pid": 7, "tid": )" + std::to_string(tid) +
         R"(, "ts": )" + ts + R"(, "dur": )" + dur + R"(, "args": {"External id": 3}})";
}
std::string chrome(const std::vector<std::string>& events) {
  std::string s = R"({"schemaVersion": 1, "traceEvents": [)";
  for (std::size_t i = 0; i < events.size(); ++i) s += (i ? ",\n" : "\n") + events[i];
  return s + "\n], \"traceName\": \"t\"}\n";
}

TEST(ChromeTrace, TagsFromInnermostSpanOnTheSameThreadWhereverTheSpansAre) {
  // Memory events first, spans after them, out of order, on two threads.
  const std::string data = chrome({
      memory_event("15.5", 512, 0x1000, 1),  // in conv2d > convolution > empty
      memory_event("30", 256, 0x2000, 1),    // in conv2d only
      memory_event("15.5", 64, 0x3000, 2),   // thread 2: in "add"
      memory_event("50", -512, 0x1000, 1),   // outside every span
      memory_event("40", 128, 0x4000, 1),    // at the end of conv2d (inclusive)
      op("aten::empty", "15", "1"),
      op("aten::conv2d", "10", "30"),
      op("aten::convolution", "12", "8"),
      op("aten::add", "14", "3", 2),
      R"({"ph": "X", "cat": "user_annotation", "name": "step", "pid": 7, "tid": 1, "ts": 0, "dur": 100})",
  });
  const Trace t = read_chrome_trace(data, "t.json");
  ASSERT_EQ(t.events.size(), 5u);
  // Time order; the two events at 15.5 us keep the file's order.
  EXPECT_EQ(t.events[0].address, 0x1000u);
  EXPECT_EQ(tag_of(t, t.events[0]), "aten::empty");
  EXPECT_EQ(t.events[0].time_ns, 15500);
  EXPECT_EQ(t.events[1].address, 0x3000u);
  EXPECT_EQ(tag_of(t, t.events[1]), "aten::add");
  EXPECT_EQ(t.events[2].address, 0x2000u);
  EXPECT_EQ(tag_of(t, t.events[2]), "aten::conv2d");
  EXPECT_EQ(t.events[3].address, 0x4000u);
  EXPECT_EQ(tag_of(t, t.events[3]), "aten::conv2d");
  EXPECT_EQ(t.events[4].action, Action::kFreeCompleted);
  EXPECT_EQ(t.events[4].size, 512);
  EXPECT_EQ(t.events[4].context, 0u);  // user_annotation spans are not operators
  EXPECT_EQ(t.events[0].device, 0);
  EXPECT_EQ(t.events[0].total_reserved, 4096);
  // One context per operator name.
  EXPECT_EQ(t.events[2].context, t.events[3].context);
}

// prof.step() opens a "ProfilerStep#N" span per step: whatever its category
// (user_annotation in newer PyTorch, cpu_op or Operator in older), except
// Kineto's copy on the GPU timeline. Steps come out in time order, and
// allocations take them as their iterations, each from its first
// allocation.
TEST(ChromeTrace, ProfilerStepSpansMarkTheIterations) {
  auto step = [](const std::string& cat, int n, const std::string& ts, const std::string& dur) {
    return R"({"ph": "X", "cat": ")" + cat + R"(", "name": "ProfilerStep#)" + std::to_string(n) +
           R"(", "pid": 7, "tid": 1, "ts": )" + ts + R"(, "dur": )" + dur + "}";
  };
  const Trace t = read_chrome_trace(
      chrome({
          memory_event("5", 64, 0x1000, 1),  // before the first step: set-up
          step("cpu_op", 1, "20", "10"), step("user_annotation", 0, "10", "10"), step("Operator", 2, "30", "10"),
          step("gpu_user_annotation", 0, "12", "3"),  // the GPU's copy: not a step of the caller's
          R"({"ph": "X", "cat": "user_annotation", "name": "ProfilerStepper", "pid": 7, "tid": 1, "ts": 0, "dur": 1})",
          memory_event("11", 512, 0x2000, 1), memory_event("13", 256, 0x3000, 1), memory_event("14", -512, 0x2000, 1),
          memory_event("25", 512, 0x2000, 1),  // step 1
          memory_event("31", 256, 0x4000, 1),  // step 2
          memory_event("45", 128, 0x5000, 1),  // after the last step
      }),
      "steps.json");
  ASSERT_EQ(t.profiler_steps.size(), 3u);
  EXPECT_EQ(t.profiler_steps[0].start_ns, 10000);
  EXPECT_EQ(t.profiler_steps[0].end_ns, 20000);
  EXPECT_EQ(t.profiler_steps[2].start_ns, 30000);
  const Lifetimes l = extract_lifetimes(t, 0, false);
  EXPECT_EQ(l.step_starts, (std::vector<std::size_t>{1, 3, 4}));
  EXPECT_EQ(l.steps_end, 5u);
  const IterationSplit split = find_iterations(l);
  EXPECT_EQ(split.starts, l.step_starts);
  EXPECT_EQ(split.end, 5u);
  // One step is not iterations; nor is a step without allocations one.
  const Trace one =
      read_chrome_trace(chrome({step("user_annotation", 0, "10", "10"), step("user_annotation", 1, "20", "10"),
                                memory_event("11", 512, 0x2000, 1)}),
                        "one.json");
  EXPECT_EQ(extract_lifetimes(one, 0, false).step_starts.size(), 1u);
  EXPECT_TRUE(find_iterations(extract_lifetimes(one, 0, false)).starts.empty());
}

// with_stack=True: python_function spans around a memory event are its
// stack, innermost first; the user's frame is the first outside libraries.
TEST(ChromeTrace, PythonFunctionSpansAreTheStack) {
  auto py = [](const std::string& name, const std::string& ts, const std::string& dur, int tid = 1) {
    return R"({"ph": "X", "cat": "python_function", "name": ")" + name + R"(", "pid": 7, "tid": )" +
           std::to_string(tid) + R"(, "ts": )" + ts + R"(, "dur": )" + dur + "}";
  };
  const Trace t = read_chrome_trace(
      chrome({
          memory_event("15", 512, 0x1000, 1),  // train.py step > model.py forward > torch linear > aten::mm
          memory_event("40", 256, 0x2000, 1),  // step only, no operator
          memory_event("15", 64, 0x3000, 2),   // thread 2: a frame without a line
          py("train.py(12): step", "0", "100"),
          py("model.py(30): forward", "10", "10"),
          py("torch/nn/modules/linear.py(113): forward", "14", "3"),
          op("aten::mm", "14.5", "1"),
          py("nn.Module: Linear_0", "10", "20", 2),
      }),
      "s.json");
  ASSERT_EQ(t.events.size(), 3u);
  const Context& mm = t.contexts[t.events[0].context];
  EXPECT_EQ(mm.tag, "aten::mm");
  ASSERT_EQ(mm.frames.size(), 3u);
  EXPECT_EQ(mm.frames[0], (Frame{"torch/nn/modules/linear.py", 113, "forward"}));
  EXPECT_EQ(mm.frames[2], (Frame{"train.py", 12, "step"}));
  EXPECT_EQ(mm.user_frame(), "forward (model.py:30)");
  const Context& module = t.contexts[t.events[1].context];
  EXPECT_EQ(module.frames, (std::vector<Frame>{{"", 0, "nn.Module: Linear_0"}}));
  EXPECT_EQ(module.label(), "nn.Module: Linear_0");
  const Context& step = t.contexts[t.events[2].context];
  EXPECT_EQ(step.tag, "");
  EXPECT_EQ(step.label(), "step (train.py:12)");
}

TEST(ChromeTrace, BareArrayDevicesOutOfMemoryAndNumberForms) {
  const std::string data =
      "[" + memory_event("1", 100, 0x10, 1, 100, 0, -1) + "," + memory_event("2", 200, 0x20, 1, 300, 1, 3) + "," +
      R"({"name": "[OutOfMemory]", "ph": "i", "ts": 3, "pid": "host", "tid": "main", "args": {"Device Type": 1, "Device Id": 3, "Bytes": 1073741824, "Total Allocated": 300, "Total Reserved": 2097152}},)" +
      // Older PyTorch: no totals; address past 2^63 and a numeric string.
      R"({"name": "[memory]", "ph": "i", "ts": 1.5e1, "args": {"Device Type": 1, "Device Id": 0, "Bytes": "-64", "Addr": 18446744073709551615}})" +
      "]";
  const Trace t = read_chrome_trace(data, "a.json");
  ASSERT_EQ(t.events.size(), 4u);
  EXPECT_EQ(t.events[0].device, -1);
  EXPECT_EQ(t.events[1].device, 3);
  EXPECT_EQ(t.events[2].action, Action::kOom);
  EXPECT_EQ(t.events[2].size, 1073741824);
  EXPECT_EQ(t.events[2].total_reserved, 2097152);
  EXPECT_EQ(t.events[3].action, Action::kFreeCompleted);
  EXPECT_EQ(t.events[3].time_ns, 15000);
  EXPECT_EQ(t.events[3].size, 64);
  EXPECT_EQ(t.events[3].address, UINT64_MAX);
  EXPECT_EQ(t.events[3].total_allocated, kUnknown);
  // PyTorch writes addresses as intptr_t: a negative one is the same bits.
  const Trace n = read_chrome_trace("[" + memory_event("1", 8, 0, 1) + "]", "n.json");
  const Trace m = read_chrome_trace(R"([{"name":"[memory]","ts":1,"args":{"Bytes":8,"Addr":-2}}])", "m.json");
  ASSERT_EQ(m.events.size(), 1u);
  EXPECT_EQ(m.events[0].address, UINT64_MAX - 1);
  EXPECT_EQ(n.events.size(), 1u);
}

TEST(ChromeTrace, EmptyTracesAndOtherEventsAreFine) {
  EXPECT_TRUE(read_chrome_trace("[]", "e.json").events.empty());
  EXPECT_TRUE(read_chrome_trace(R"({"traceEvents": []})", "e.json").events.empty());
  const Trace t = read_chrome_trace(
      R"({"traceEvents": [{"ph": "M", "name": "process_name", "args": {"name": {"nested": [1, 2]}}},
          {"ph": "f", "id": 1, "ts": 5, "name": "ac2g", "bp": "e"}, {"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2}],
          "deviceProperties": [{"id": 0}], "displayTimeUnit": "ms"})",
      "o.json");
  EXPECT_TRUE(t.events.empty());
  EXPECT_TRUE(t.warnings.empty());
}

TEST(ChromeTrace, WrongTypesAndMissingArgsAreSkippedAndCounted) {
  const std::string data = chrome({
      memory_event("1", 100, 0x10),
      R"({"name": "[memory]", "ts": 2, "args": {"Bytes": "many", "Addr": 16}})",
      R"({"name": "[memory]", "ts": 3, "args": {"Addr": 16}})",
      R"({"name": "[memory]", "ts": 4, "args": {"Bytes": 5, "Addr": 1.5}})",
      R"({"name": "[memory]", "ts": "soon", "args": {"Bytes": 5, "Addr": 16}})",
      R"({"name": "[memory]", "ts": 6, "args": {"Bytes": 0, "Addr": 16}})",
      R"({"name": "[memory]", "ts": 7, "args": {"Bytes": 5, "Addr": 16, "Device Id": [0]}})",
      R"(17)",
      memory_event("9", -100, 0x10),
  });
  const Trace t = read_chrome_trace(data, "bad.json");
  EXPECT_EQ(t.events.size(), 2u);
  EXPECT_EQ(t.skipped_records, 7u);
  ASSERT_EQ(t.warnings.size(), 1u);
  EXPECT_NE(t.warnings[0].find("skipped 7 events"), std::string::npos) << t.warnings[0];
  EXPECT_NE(t.warnings[0].find("traceEvents[1]: [memory] event: \"Bytes\" is not an integer"), std::string::npos)
      << t.warnings[0];
  ReadOptions strict{.strict = true};
  expect_error([&] { read_chrome_trace(data, "bad.json", strict); },
               {"bad.json: traceEvents[1]: ", "\"Bytes\" is not an integer"});
  expect_error(
      [&] {
        read_chrome_trace(chrome({memory_event("1", 1, 1), R"({"name": "[memory]", "ts": 3, "args": {"Addr": 16}})"}),
                          "b.json", strict);
      },
      {"b.json: traceEvents[1]: [memory] event without \"Bytes\""});
}

TEST(ChromeTrace, NotAChromeTrace) {
  expect_error([] { read_chrome_trace("", "e.json"); }, {"e.json: byte 0: the file is empty"});
  expect_error([] { read_chrome_trace("42", "n.json"); }, {"n.json: ", "not a Chrome trace"});
  expect_error([] { read_chrome_trace("nope", "x.json"); }, {"x.json: byte ", "not a Chrome trace"});
  expect_error([] { read_chrome_trace(R"({"traceEvents": {"a": 1}})", "o.json"); },
               {"\"traceEvents\" is not an array"});
  expect_error([] { read_chrome_trace(R"({"traceEvents": 3})", "o.json"); }, {"\"traceEvents\" is not an array"});
  expect_error([] { read_chrome_trace(R"({"events": []})", "o.json"); }, {"no \"traceEvents\" array"});
}

TEST(ChromeTrace, TruncatedAnywhereKeepsWhatWasReadOrSaysWhere) {
  const std::string data = chrome({
      op("aten::empty", "0", "100"),
      memory_event("1", 100, 0x10),
      memory_event("2.25", 200, 0x20),
      memory_event("3", -100, 0x10),
  });
  const Trace full = read_chrome_trace(data, "full.json");
  ASSERT_EQ(full.events.size(), 3u);
  std::size_t previous = 0;
  for (std::size_t cut = 0; cut < data.size(); ++cut) {
    const std::string_view part(data.data(), cut);
    bool whole = false;  // the cut removed only trailing whitespace
    try {
      const Trace t = read_chrome_trace(part, "cut.json");
      whole = t.warnings.empty();
      EXPECT_LE(t.events.size(), full.events.size());
      EXPECT_GE(t.events.size(), previous) << cut;  // more bytes never lose events
      previous = t.events.size();
      if (!whole) {
        ASSERT_EQ(t.warnings.size(), 1u) << cut;
        EXPECT_NE(t.warnings[0].find("cut.json: byte "), std::string::npos);
        EXPECT_NE(t.warnings[0].find("the file ends inside the JSON"), std::string::npos) << t.warnings[0];
      }
      for (std::size_t i = 0; i < t.events.size(); ++i) EXPECT_EQ(t.events[i].address, full.events[i].address);
    } catch (const InputError& e) {
      // Only before the top-level container opens.
      EXPECT_LT(data.find_first_not_of(" \n"), std::max<std::size_t>(cut, 1)) << e.what();
      EXPECT_LE(cut, data.find('{')) << e.what();
    }
    if (whole) continue;
    try {
      read_chrome_trace(part, "cut.json", ReadOptions{.strict = true});
      ADD_FAILURE() << "strict read of a cut at " << cut << " succeeded";
    } catch (const InputError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("cut.json: byte "), std::string::npos) << m;
      EXPECT_EQ(m.find('\n'), std::string::npos);
    }
  }
  EXPECT_EQ(previous, 3u);
  // The byte offset is where the text ends.
  expect_error([&] { read_chrome_trace(data.substr(0, 100), "cut.json", ReadOptions{.strict = true}); },
               {"cut.json: byte 100: the file ends inside the JSON"});
}

TEST(ChromeTrace, InvalidJsonInTheMiddle) {
  std::string data = chrome({memory_event("1", 100, 0x10), memory_event("2", 100, 0x20)});
  const std::size_t second = data.find("{\"ph\"", data.find("[memory]"));
  data[second + 1] = '#';
  const Trace t = read_chrome_trace(data, "mid.json");
  EXPECT_EQ(t.events.size(), 1u);
  ASSERT_EQ(t.warnings.size(), 1u);
  EXPECT_NE(t.warnings[0].find("mid.json: byte " + std::to_string(second + 2) + ": invalid JSON"), std::string::npos)
      << t.warnings[0];
  expect_error([&] { read_chrome_trace(data, "mid.json", ReadOptions{.strict = true}); },
               {"mid.json: byte " + std::to_string(second + 2) + ": invalid JSON (last read: '"});
  // Something after the trace.
  const Trace tail = read_chrome_trace(chrome({memory_event("1", 1, 1)}) + "]", "tail.json");
  EXPECT_EQ(tail.events.size(), 1u);
  EXPECT_EQ(tail.warnings.size(), 1u);
}

// --- RMM logs -----------------------------------------------------------------

TEST(RmmLog, ReadsTheLoggingAdaptorsCsv) {
  const Trace t = read_trace(trace_path("rmm_sample.csv"));
  EXPECT_EQ(t.format, "rmm-log");
  EXPECT_TRUE(t.warnings.empty());
  ASSERT_EQ(t.events.size(), 7u);
  const std::int64_t second = 1'000'000'000, day = 86'400 * second;
  EXPECT_EQ(t.events[0].action, Action::kAlloc);
  EXPECT_EQ(t.events[0].address, 0x7f8a40000000u);
  EXPECT_EQ(t.events[0].size, 1024);
  EXPECT_EQ(t.events[0].stream, 0u);
  EXPECT_EQ(t.events[0].time_ns, 86'399 * second + 998'712'000);
  EXPECT_EQ(t.events[1].stream, 0x7f8a38001020u);
  EXPECT_EQ(t.events[2].action, Action::kFreeCompleted);
  // Past midnight: the next day, so times keep increasing.
  EXPECT_EQ(t.events[3].time_ns, day + 127'000);
  EXPECT_EQ(t.events[3].size, 4194304);
  EXPECT_EQ(t.events[4].action, Action::kOom);
  EXPECT_EQ(t.events[4].size, 85899345920);
  EXPECT_EQ(t.events[4].address, 0u);
  EXPECT_EQ(t.events[6].time_ns, day + 1'290'000);
  const Lifetimes l = extract_lifetimes(t, 0, true);
  EXPECT_EQ(l.allocations.size(), 3u);
  EXPECT_EQ(trace_stats(t, l).peak_allocated, 4194304 + 2048);
}

TEST(RmmLog, NewerRmmWithoutHexPrefixesAndEpochTimes) {
  // Newer RMM formats with %llx; its documentation shows epoch seconds and
  // "deallocate".
  const Trace t = read_rmm_log(
      "Thread,Time,Action,Pointer,Size,Stream\r\n"
      "12,1634567890.123456,allocate,7f8a40000000,1024,0\r\n"
      "12,1634567890.5,deallocate,7f8a40000000,1024,0\r\n"
      "12,not-a-time,allocate,7f8a40000000,8,0\r\n",
      "new.csv");
  ASSERT_EQ(t.events.size(), 3u);
  EXPECT_EQ(t.events[0].address, 0x7f8a40000000u);
  EXPECT_EQ(t.events[0].time_ns, 1634567890123456000);
  EXPECT_EQ(t.events[1].action, Action::kFreeCompleted);
  EXPECT_EQ(t.events[1].time_ns, 1634567890500000000);
  EXPECT_EQ(t.events[2].time_ns, kUnknown);
}

TEST(RmmLog, BadLinesNameTheirLine) {
  const std::string data =
      "Thread,Time,Action,Pointer,Size,Stream\n"
      "1,10:00:00.000001,allocate,0x10,64,0x0\n"
      "\n"
      "1,10:00:00.000002,reallocate,0x10,64,0x0\n"
      "1,10:00:00.000003,allocate,0xZZ,64,0x0\n"
      "1,10:00:00.000004,allocate,0x20,-64,0x0\n"
      "1,10:00:00.000005,allocate,0x30,64\n"
      "1,10:00:00.000006,free,0x10,64,0x0,extra\n"
      "1,10:00:00.000007,free,0x10,64,stream\n"
      "1,10:00:00.000008,free,0x10,64,0x0\n";
  const Trace t = read_rmm_log(data, "r.csv");
  EXPECT_EQ(t.events.size(), 2u);
  EXPECT_EQ(t.skipped_records, 6u);
  ASSERT_EQ(t.warnings.size(), 1u);
  EXPECT_NE(t.warnings[0].find("line 4: unknown action 'reallocate'"), std::string::npos) << t.warnings[0];
  const ReadOptions strict{.strict = true};
  expect_error([&] { read_rmm_log(data, "r.csv", strict); }, {"r.csv: line 4: unknown action 'reallocate'"});
  const std::string from5 =
      "Thread,Time,Action,Pointer,Size,Stream\n\n\n\n" + data.substr(data.find("1,10:00:00.000003"));
  expect_error([&] { read_rmm_log(from5, "r.csv", strict); }, {"r.csv: line 5: pointer '0xZZ' is not hexadecimal"});
  expect_error([&] { read_rmm_log("Thread,Time,Action\n", "h.csv"); }, {"h.csv: line 1: not an RMM log header"});
  expect_error([&] { read_rmm_log("\n\n", "h.csv"); }, {"h.csv: empty file"});
}

// --- gpumem allocator history -----------------------------------------------------

TEST(History, ReadsARealAllocatorHistoryAndWritesItBack) {
  using namespace gpumem::alloc;
  SimulatedDevice device;
  AllocatorConfig config;
  config.history_capacity = 1000;
  std::string written;
  std::vector<HistoryEvent> expected;
  TagTable names;
  {
    CachingAllocator a(simulated_upstream(device), config);
    const TagId weights = a.intern_tag("weights"), act = a.intern_tag("layer \"1\"\tactivations");
    void* w = a.allocate_tagged(3 << 20, 0, weights);
    std::vector<void*> acts;
    for (int i = 0; i < 5; ++i) acts.push_back(a.allocate_tagged(std::size_t(1000 * (i + 1)), 0, act));
    void* s = a.allocate(25 << 20, 7);  // another stream
    for (int i = 4; i >= 0; --i) a.deallocate(acts[std::size_t(i)], std::size_t(1000 * (i + 1)), 0);
    a.deallocate(s, 25 << 20, 7);
    a.empty_cache();
    a.deallocate(w, 3 << 20, 0);
    std::ostringstream out;
    a.write_history(out);
    written = out.str();
    expected = a.history();
    names.intern("weights");
    names.intern("layer \"1\"\tactivations");
  }
  const Trace t = read_history(written, "h.jsonl");
  EXPECT_EQ(t.format, "gpumem-history");
  EXPECT_TRUE(t.warnings.empty()) << t.warnings[0];
  ASSERT_EQ(t.events.size(), expected.size());
  std::set<std::string> actions;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const HistoryEvent& h = expected[i];
    const Event& e = t.events[i];
    EXPECT_STREQ(action_name(e.action), alloc::action_name(h.action)) << i;
    EXPECT_EQ(e.address, h.address) << i;
    EXPECT_EQ(static_cast<std::uint64_t>(e.size), h.size) << i;
    EXPECT_EQ(e.stream, h.stream) << i;
    EXPECT_EQ(static_cast<std::uint64_t>(e.time_ns), h.time_ns) << i;
    EXPECT_EQ(tag_of(t, e), names.name(h.tag)) << i;
    actions.insert(action_name(e.action));
  }
  EXPECT_TRUE(actions.count("segment_alloc") && actions.count("segment_free") && actions.count("free_completed"));

  // Written by the trace writer and read again: the same events.
  std::ostringstream again;
  write_history(t, again);
  EXPECT_STREQ(detect_format(again.str().substr(0, 256), "again.jsonl").name, "gpumem-history");
  const Trace u = read_history(again.str(), "again.jsonl");
  ASSERT_EQ(u.events.size(), t.events.size());
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    EXPECT_EQ(u.events[i].action, t.events[i].action);
    EXPECT_EQ(u.events[i].address, t.events[i].address);
    EXPECT_EQ(u.events[i].size, t.events[i].size);
    EXPECT_EQ(u.events[i].stream, t.events[i].stream);
    EXPECT_EQ(u.events[i].time_ns, t.events[i].time_ns);
    EXPECT_EQ(tag_of(u, u.events[i]), tag_of(t, t.events[i]));
  }
}

TEST(History, WritesAnyTraceDevicesAndUnknownTimesIncluded) {
  const Trace chrome_trace = read_trace(trace_path("resnet18_train.json"));
  std::ostringstream out;
  write_history(chrome_trace, out);
  const Trace t = read_history(out.str(), "r.jsonl");
  ASSERT_EQ(t.events.size(), chrome_trace.events.size());
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    EXPECT_EQ(t.events[i].device, -1);
    EXPECT_EQ(t.events[i].time_ns, chrome_trace.events[i].time_ns);
    EXPECT_EQ(tag_of(t, t.events[i]), tag_of(chrome_trace, chrome_trace.events[i]));
  }
  Trace untimed;
  Event e;
  e.size = 10;
  untimed.events.push_back(e);
  std::ostringstream u;
  write_history(untimed, u);
  EXPECT_EQ(read_history(u.str(), "u.jsonl").events.at(0).time_ns, kUnknown);
}

TEST(History, BadLinesNameTheirLine) {
  const std::string data = R"({"dropped":2,"events":6,"format":"gpumem-history","version":1})"
                           "\n"
                           R"({"action":"alloc","addr":4096,"requested":100,"size":512,"stream":0,"time_ns":5})"
                           "\n"
                           R"({"action":"teleport","addr":4096,"size":512,"stream":0,"time_ns":6})"
                           "\n"
                           R"({"action":"alloc","addr":"4096","size":512,"stream":0,"time_ns":7})"
                           "\n"
                           R"({"action":"alloc","addr":8192,"size":-5,"stream":0})"
                           "\n"
                           R"({"action":"alloc","addr":8192,"size":5,"stream":0,"tag":{"x":1}})"
                           "\n"
                           R"({"action":"free_completed","addr":4096,"size":512)"
                           "\n";
  const Trace t = read_history(data, "h.jsonl");
  EXPECT_EQ(t.events.size(), 1u);
  EXPECT_EQ(t.skipped_records, 5u);
  ASSERT_EQ(t.warnings.size(), 2u);
  EXPECT_NE(t.warnings[0].find("h.jsonl: skipped 5 lines that could not be used; the first: line 3: unknown action "
                               "'teleport'"),
            std::string::npos)
      << t.warnings[0];
  EXPECT_NE(t.warnings[1].find("dropped the 2 oldest events"), std::string::npos) << t.warnings[1];
  const ReadOptions strict{.strict = true};
  expect_error([&] { read_history(data, "h.jsonl", strict); }, {"h.jsonl: line 3: unknown action 'teleport'"});
  std::string lines = data;
  lines.erase(lines.find(R"({"action":"teleport")"),
              lines.find('\n', lines.find("teleport")) + 1 - lines.find(R"({"action":"teleport")"));
  expect_error([&] { read_history(lines, "h.jsonl", strict); }, {"h.jsonl: line 3: \"addr\" is not an integer"});
  expect_error([&] { read_history("{\"format\":\"other\"}\n", "x.jsonl"); },
               {"x.jsonl: line 1: not a gpumem history header"});
  expect_error([&] { read_history(R"({"format":"gpumem-history","version":2})", "x.jsonl"); }, {"version 2"});
  // A cut file: fewer events than the header announces.
  const std::string cut = R"({"format":"gpumem-history","version":1,"events":3,"dropped":0})"
                          "\n"
                          R"({"action":"alloc","time_ns":1,"addr":1,"size":1,"requested":1,"stream":0})"
                          "\n";
  EXPECT_EQ(read_history(cut, "c.jsonl").warnings.size(), 1u);
  expect_error([&] { read_history(cut, "c.jsonl", strict); }, {"c.jsonl: line 2: the header announces 3 events"});
}

// --- MiniMalloc CSV ----------------------------------------------------------------

TEST(MinimallocCsv, BuffersBecomeAllocationsAndFreesInTimeOrder) {
  const Trace p = read_minimalloc_csv("id,lower,upper,size\nb0,0,3,100\nb1,3,5,200\nb2,1,3,50\nb3,3,4,10\n", "p.csv");
  ASSERT_EQ(p.events.size(), 8u);
  // (time, action, buffer): frees before allocations at the same time.
  const std::vector<std::tuple<std::int64_t, Action, std::string>> expected = {
      {0, Action::kAlloc, "b0"},         {1, Action::kAlloc, "b2"},        {3, Action::kFreeCompleted, "b0"},
      {3, Action::kFreeCompleted, "b2"}, {3, Action::kAlloc, "b1"},        {3, Action::kAlloc, "b3"},
      {4, Action::kFreeCompleted, "b3"}, {5, Action::kFreeCompleted, "b1"}};
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(p.events[i].time_ns, std::get<0>(expected[i])) << i;
    EXPECT_EQ(p.events[i].action, std::get<1>(expected[i])) << i;
    EXPECT_EQ(tag_of(p, p.events[i]), std::get<2>(expected[i])) << i;
  }
  EXPECT_EQ(p.events[0].address, std::uint64_t{1} << 32);  // no offsets: (index + 1) << 32
  EXPECT_EQ(p.events[4].address, std::uint64_t{2} << 32);
  EXPECT_EQ(p.events[4].size, 200);
  const Lifetimes l = extract_lifetimes(p, 0, true);
  EXPECT_EQ(trace_stats(p, l).peak_allocated, 210);

  // With a plan's offsets, the offsets are the addresses.
  const Trace o = read_minimalloc_csv("id,lower,upper,size,offset\na,0,2,64,0\nb,2,4,64,0\nc,0,4,32,64\n", "o.csv");
  EXPECT_EQ(o.events[0].address, 0u);
  EXPECT_EQ(o.events[1].address, 64u);
  EXPECT_EQ(extract_lifetimes(o, 0, true).anomalies.total(), 0u);
  expect_error([] { read_minimalloc_csv("id,lower,upper,size\nb0,5,3,100\n", "bad.csv"); }, {"bad.csv:2:"});
}

// --- Perfetto ---------------------------------------------------------------------------

struct PerfettoSummary {
  std::map<std::string, std::int64_t> counter_max;  // by counter name
  std::size_t spans = 0;
  std::size_t instants = 0;
};

// Parses the output and checks that every thread's spans nest. Times are
// shifted to start at 0 first: JSON parsers read numbers as doubles, which
// cannot hold 1796062679695603.586 exactly and would blur the nesting.
PerfettoSummary check_perfetto(Trace t) {
  const std::int64_t origin = t.events.empty() ? 0 : t.events.front().time_ns;
  for (Event& e : t.events)
    if (e.time_ns != kUnknown) e.time_ns -= origin;
  std::ostringstream out;
  write_perfetto(t, out);
  const nlohmann::json doc = nlohmann::json::parse(out.str());
  PerfettoSummary s;
  std::map<std::pair<int, int>, std::vector<std::pair<std::int64_t, std::int64_t>>> by_thread;
  // Back to integer nanoseconds: ts + dur in doubles may round.
  auto ns = [](const nlohmann::json& us) { return std::llround(us.get<double>() * 1000); };
  for (const auto& e : doc.at("traceEvents")) {
    const std::string ph = e.at("ph");
    if (ph == "C") {
      const std::int64_t v = e.at("args").at("bytes");
      auto [it, inserted] = s.counter_max.try_emplace(e.at("name"), v);
      if (!inserted) it->second = std::max(it->second, v);
    } else if (ph == "X") {
      ++s.spans;
      EXPECT_TRUE(e.at("args").contains("size"));
      EXPECT_TRUE(e.at("args").contains("address"));
      by_thread[{e.at("pid").get<int>(), e.at("tid").get<int>()}].push_back(
          {ns(e.at("ts")), ns(e.at("ts")) + ns(e.at("dur"))});
    } else if (ph == "i") {
      ++s.instants;
    }
  }
  for (auto& [thread, spans] : by_thread) {
    std::sort(spans.begin(), spans.end(),
              [](auto& a, auto& b) { return a.first != b.first ? a.first < b.first : a.second > b.second; });
    std::vector<std::int64_t> open;
    for (auto [start, end] : spans) {
      while (!open.empty() && open.back() <= start) open.pop_back();
      EXPECT_TRUE(open.empty() || end <= open.back()) << "spans overlap without nesting on a thread";
      open.push_back(end);
    }
  }
  return s;
}

TEST(Perfetto, RealTraceCountersPeakAtTheTracesPeak) {
  const Trace t = read_trace(trace_path("resnet18_train.json"));
  const PerfettoSummary s = check_perfetto(t);
  const Lifetimes l = extract_lifetimes(t, -1, true);
  EXPECT_EQ(s.counter_max.at("allocated"), trace_stats(t, l).peak_allocated);
  EXPECT_EQ(s.counter_max.at("allocated"), 109246552);
  EXPECT_EQ(s.counter_max.at("reserved"), 0);  // the CPU allocator reserves nothing
  EXPECT_EQ(s.spans, l.allocations.size());
  EXPECT_EQ(s.instants, 0u);
  // The transformer's counter starts at its baseline.
  const Trace u = read_trace(trace_path("transformer_train.json"));
  EXPECT_EQ(check_perfetto(u).counter_max.at("allocated"), 89766392);
}

TEST(Perfetto, AllocatorHistoryReservedFromSegmentsAndInstants) {
  using namespace gpumem::alloc;
  SimulatedDevice device;
  AllocatorConfig config;
  config.history_capacity = 100;
  CachingAllocator a(simulated_upstream(device), config);
  void* x = a.allocate(30 << 20);
  void* y = a.allocate(1000, 3);
  a.deallocate(x, 30 << 20);
  a.empty_cache();
  void* z = a.allocate(5 << 20);
  std::ostringstream out;
  a.write_history(out);
  Trace t = read_history(out.str(), "a.jsonl");
  // A tag that is not UTF-8 must still give valid JSON.
  t.events[1].context = t.intern(Context{"bad \xff\xfe tag \"q\"", {}});
  const PerfettoSummary s = check_perfetto(t);
  const Lifetimes l = extract_lifetimes(t, 0, true);
  EXPECT_EQ(s.counter_max.at("allocated"), trace_stats(t, l).peak_allocated);
  std::int64_t reserved = 0, peak = 0;
  std::size_t segment_events = 0;
  for (const Event& e : t.events) {
    if (e.action == Action::kSegmentAlloc) reserved += e.size, ++segment_events;
    if (e.action == Action::kSegmentFree) reserved -= e.size, ++segment_events;
    peak = std::max(peak, reserved);
  }
  EXPECT_GT(segment_events, 2u);
  EXPECT_EQ(s.counter_max.at("reserved"), peak);
  EXPECT_EQ(s.instants, segment_events);
  EXPECT_EQ(s.spans, 3u);
  a.deallocate(y, 1000, 3);
  a.deallocate(z, 5 << 20);
}

TEST(Perfetto, EmptyTraceAndUnknownTimes) {
  std::ostringstream out;
  write_perfetto(Trace{}, out);
  EXPECT_TRUE(nlohmann::json::parse(out.str()).at("traceEvents").empty());
  const Trace r =
      read_rmm_log("Thread,Time,Action,Pointer,Size,Stream\n1,?,allocate,0x10,64,0x0\n1,?,free,0x10,64,0x0\n", "r.csv");
  const PerfettoSummary s = check_perfetto(r);
  EXPECT_EQ(s.spans, 1u);
  EXPECT_EQ(s.counter_max.at("allocated"), 64);
}

}  // namespace
}  // namespace gpumem::trace
