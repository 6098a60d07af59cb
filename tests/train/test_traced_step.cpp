// Steps traced by gpumem.torch.estimate (fake tensors, torch 2.x) against the
// same steps run for real on the CPU with transformers and peft
// (tools/record_torch2.py; tests/data/torch2/SPLIT.md). `gpumem train` reads
// each traced step; its allocated peak must be the estimator's own figure
// (the C++ summary and the Python sweep agree) and within the goals of the
// recorded peak, reported by half. Malformed documents are one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "gpumem/common/error.h"
#include "gpumem/common/files.h"
#include "gpumem/train/device_memory.h"
#include "gpumem/train/traced_step.h"
#include "test_paths.h"

namespace gpumem::train {
namespace {

namespace fs = std::filesystem;

struct Case {
  std::string name, half, version;
  uint64_t recorded = 0, estimate = 0;
  fs::path step;
};

std::vector<Case> corpus() {
  std::vector<Case> out;
  const fs::path root = test::source_dir() / "tests" / "data" / "torch2";
  if (!fs::exists(root)) return out;
  for (const auto& version : fs::directory_iterator(root)) {
    // CPU recordings only: cuda-* folders (scripts/gpu_check.sh) hold device figures.
    if (!version.is_directory() || version.path().filename().string().starts_with("cuda-")) continue;
    for (const auto& f : fs::directory_iterator(version.path())) {
      const std::string file = f.path().filename().string();
      if (!file.ends_with(".facts.json")) continue;
      const auto facts = nlohmann::json::parse(test::read_file_bytes(f.path()));
      Case c;
      c.name = facts["case"].get<std::string>();
      c.half = facts["half"].get<std::string>();
      c.version = version.path().filename().string();
      c.recorded = facts["recorded_peak_bytes"].get<uint64_t>();
      c.estimate = facts["estimate_peak_bytes"].get<uint64_t>();
      c.step = version.path() / (c.name + ".step.json.gz");
      out.push_back(c);
    }
  }
  std::sort(out.begin(), out.end(),
            [](const Case& a, const Case& b) { return std::tie(a.version, a.name) < std::tie(b.version, b.name); });
  return out;
}

TEST(TracedStep, CorpusHasBothReleasesAndBothHalves) {
  const auto cases = corpus();
  std::map<std::string, int> per_version, per_half;
  for (const auto& c : cases) {
    ++per_version[c.version];
    ++per_half[c.half];
  }
  EXPECT_GE(cases.size(), 160u);
  EXPECT_EQ(per_version.size(), 2u);
  EXPECT_GE(per_half["test"], 60);
  EXPECT_GE(per_half["tuning"], 60);
}

// Known gaps, measured and pinned (a fix must move them, and then this list):
// convnext's 7x7 depthwise convolutions run on the CPU through slow_conv2d,
// whose im2col columns (N x C x 49 x H x W per call) are kernel scratch that
// no fake tensor shows: -3.3% to -8.4%, all three on the tuning half.
bool known_gap(const std::string& name) { return name.starts_with("convnext_tiny_"); }

TEST(TracedStep, PeakIsTheEstimatorsAndWithinGoalsOfTheRecordedStep) {
  TrainOptions cpu;
  cpu.device = Device::kCpu;
  std::map<std::string, std::vector<double>> errors;
  for (const auto& c : corpus()) {
    SCOPED_TRACE(c.version + "/" + c.name);
    const TrainingStep step = load_traced_step(c.step.string(), cpu);
    EXPECT_EQ(step.peak_bytes, c.estimate);
    EXPECT_EQ(step.options.device, Device::kCpu);
    ASSERT_TRUE(step.traced.has_value());
    EXPECT_NE(step.traced->with.find("fake tensors"), std::string::npos);
    // On the CPU nothing is cached: what the device needs is what is allocated.
    EXPECT_EQ(device_memory(step).device_bytes(), step.peak_bytes);
    const double error = static_cast<double>(step.peak_bytes) / static_cast<double>(c.recorded) - 1;
    if (known_gap(c.name) && std::abs(error) > 0.01) {
      std::printf("traced steps, known gap: %s/%s %+.2f%%\n", c.version.c_str(), c.name.c_str(), 100 * error);
      EXPECT_LT(error, 0.0);
      EXPECT_GT(error, -0.09);
      continue;
    }
    errors[c.half].push_back(std::abs(error));
  }
  for (auto& [half, e] : errors) {
    std::sort(e.begin(), e.end());
    const double median = e[e.size() / 2], worst = e.back();
    std::printf("traced steps, %s half: %zu steps, median |error| %.3f%%, worst %.3f%%\n", half.c_str(), e.size(),
                median * 100, worst * 100);
    EXPECT_LE(median, 0.01) << half;  // the goals: 1% in the median, 3% at worst
    EXPECT_LE(worst, 0.03) << half;
  }
}

std::string minimal(const std::string& allocations, const std::string& extra = "") {
  return R"({"format": "gpumem-step", "version": 1, "model": "M", "traced_with": "test",)"
         R"( "settings": {"device": "cuda", "optimizer": "AdamW", "precision": "fp32"},)"
         R"( "parameters": {"trainable": 10, "frozen": 0}, "end": 4,)"
         R"( "phases": [{"phase": "resident", "start": 0}, {"phase": "forward", "start": 1},)"
         R"( {"phase": "backward", "start": 2}, {"phase": "optimizer", "start": 3}],)" +
         extra + R"( "allocations": )" + allocations + "}";
}

TEST(TracedStep, SummarizesLikeAPredictedStep) {
  const std::string doc = minimal(
      R"([{"tensor": "w", "op": "parameter", "phase": "resident", "category": "weights", "bytes": 1000, "alloc": 0, "free": 4},)"
      R"( {"tensor": "a", "op": "addmm", "module": "fc", "phase": "forward", "category": "saved_activations", "bytes": 500, "alloc": 1, "free": 3},)"
      R"( {"tensor": "grad of w", "op": "mm", "phase": "backward", "category": "gradients", "bytes": 1000, "alloc": 2, "free": 4}])");
  const TrainingStep s = parse_traced_step(doc, "doc.json", TrainOptions{});
  EXPECT_EQ(s.peak_bytes, 2500u);
  EXPECT_EQ(s.peak_time, 2);
  EXPECT_EQ(s.peak_phase, Phase::kBackward);
  EXPECT_EQ(s.allocations[1].op, "fc: addmm");
  EXPECT_EQ(s.allocations[1].module, "fc");
  EXPECT_EQ(s.breakdown[static_cast<int>(Category::kSavedActivations)], 500u);
  EXPECT_EQ(s.options.device, Device::kCuda);
  ASSERT_TRUE(s.traced.has_value());
  EXPECT_EQ(s.traced->optimizer, "AdamW");
  EXPECT_EQ(s.traced->precision, "fp32");
  EXPECT_EQ(s.trainable_parameters, 10u);
}

TEST(TracedStep, MalformedDocumentsAreOneLineErrorsNamingThePlace) {
  const std::string ok =
      R"({"tensor": "w", "op": "p", "phase": "resident", "category": "weights", "bytes": 1, "alloc": 0, "free": 4})";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"{", "not valid JSON"},
      {R"({"format": "other"})", "not a gpumem-step document"},
      {minimal("[" + ok + "]").replace(minimal("").find("\"version\": 1"), 12, "\"version\": 9"), "version 9"},
      {minimal(
           R"([{"tensor": "w", "op": "p", "phase": "resident", "category": "weights", "bytes": 1, "alloc": 3, "free": 2}])"),
       "allocations[0]: free is not after alloc"},
      {minimal(
           R"([{"tensor": "w", "op": "p", "phase": "resident", "category": "weights", "bytes": 1, "alloc": 0, "free": 99}])"),
       "allocations[0]: 'free' is 99, more than 4"},
      {minimal(
           R"([{"tensor": "w", "op": "p", "phase": "resident", "category": "weights", "bytes": 4611686018427387904, "alloc": 0, "free": 4}])"),
       "'bytes' is 4611686018427387904, more than"},
      {minimal(
           R"([{"tensor": "w", "op": "p", "phase": "warmup", "category": "weights", "bytes": 1, "alloc": 0, "free": 4}])"),
       "allocations[0]: phase is not"},
      {minimal(
           R"([{"tensor": "w", "op": "p", "phase": "resident", "category": "x", "bytes": 1, "alloc": 0, "free": 4}])"),
       "allocations[0]: category is not"},
      {minimal(
           R"([{"tensor": "w", "op": "p", "phase": "resident", "category": "weights", "bytes": -1, "alloc": 0, "free": 4}])"),
       "'bytes' is not a non-negative integer"},
      {minimal(R"({})"), "allocations: not an array"},
      {minimal("[" + ok + "]").replace(minimal("").find("\"end\": 4"), 8, "\"end\": 9999"),
       "end: 9999 times for 1 allocations"},
  };
  for (const auto& [text, expected] : bad) {
    SCOPED_TRACE(text);
    try {
      parse_traced_step(text, "bad.json", TrainOptions{});
      ADD_FAILURE() << "accepted";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("bad.json: "), std::string::npos) << what;
      EXPECT_NE(what.find(expected), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
}

}  // namespace
}  // namespace gpumem::train
