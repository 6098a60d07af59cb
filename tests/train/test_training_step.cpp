// One training step's memory, predicted from the graph, against what
// PyTorch really allocated (recorded steps) and against rules small graphs
// make checkable by hand.
#include <numeric>
#include <string>

#include <gtest/gtest.h>

#include "gpumem/common/error.h"
#include "gpumem/model/onnx_loader.h"
#include "gpumem/trace/lifetimes.h"
#include "gpumem/train/training_step.h"
#include "model/onnx_builder.h"
#include "train/recorded_steps.h"

namespace gpumem::train {
namespace {

using test::OnnxBuilder;

class Recorded : public ::testing::TestWithParam<test::RecordedStep> {};

// The goal: within 3% of the recorded peak. Resident bytes and the
// activations kept at the end of the forward pass are checked on their own,
// so that errors cannot cancel out.
TEST_P(Recorded, PeakResidentAndSavedActivationsMatchPyTorch) {
  const auto& [name, options] = GetParam();
  const auto facts = test::recorded_facts(name);
  const TrainingStep step = predict_training_step(test::train_data(name + ".onnx"), options);
  const double recorded_peak = facts["recorded_peak_bytes"].get<double>();
  EXPECT_NEAR(static_cast<double>(step.peak_bytes), recorded_peak, 0.03 * recorded_peak) << name;
  EXPECT_EQ(to_string(step.peak_phase), facts["peak"]["phase"].get<std::string>()) << name;

  // Resident: parameters, buffers, optimizer states, the batch and labels
  // (the graph has no num_batches_tracked: 8 bytes per BatchNorm).
  const double resident = facts["resident_bytes"].get<double>();
  EXPECT_NEAR(static_cast<double>(step.timeline.front().live_bytes), resident, 0.001 * resident) << name;

  // Live at the end of the forward pass and the loss: everything backward needs.
  uint64_t end_of_loss = 0;
  for (const auto& p : step.timeline) {
    if (p.phase == Phase::kLoss) end_of_loss = p.live_bytes;
  }
  const double recorded_end = resident + facts["phases"]["backward"]["start_above_resident"].get<double>();
  EXPECT_NEAR(static_cast<double>(end_of_loss), recorded_end, 0.03 * recorded_end) << name;

  // The most live in each phase, too.
  for (const Phase phase : {Phase::kForward, Phase::kBackward, Phase::kOptimizer}) {
    const double recorded = resident + facts["phases"][to_string(phase)]["max_above_resident"].get<double>();
    EXPECT_NEAR(static_cast<double>(step.peak_in_phase[static_cast<int>(phase)]), recorded, 0.03 * recorded)
        << name << " " << to_string(phase);
  }
}

// The sequence-first language models exported with a dynamic batch axis
// (tools/export_dynamic_lms.py): --batch binds the batch, not the
// sequence; at the recorded batch the step is the recorded one.
TEST(BatchAxisSteps, SequenceFirstModelsChangeTheirBatchNotTheirSequence) {
  struct Case {
    std::string recorded;
    int64_t batch;
  };
  for (const Case& c : {Case{"transformer_adamw", 8}, Case{"gpt_adam", 6}}) {
    TrainOptions o;
    for (const auto& r : test::recorded_steps())
      if (r.name == c.recorded) o = r.options;
    const std::string dynamic = test::train_data(c.recorded + "_dynamic.onnx");
    uint64_t previous = 0;
    for (int64_t batch : {c.batch / 2, c.batch, c.batch * 2}) {
      o.model.load.batch = batch;
      const TrainingStep step = predict_training_step(dynamic, o);
      EXPECT_EQ(step.batch_axis.symbol, "batch");
      EXPECT_EQ(step.batch_axis.value, batch);
      EXPECT_GT(step.peak_bytes, previous) << c.recorded << " at " << batch;
      previous = step.peak_bytes;
      // The TinyLM recorded at batches 4 and 16 (m_transformer_b4, _b16).
      if (c.recorded == "transformer_adamw" && batch != c.batch) {
        const auto facts = test::recorded_facts(batch == 4 ? "m_transformer_b4" : "m_transformer_b16");
        const double recorded = facts["recorded_peak_bytes"].get<double>();
        EXPECT_NEAR(static_cast<double>(step.peak_bytes), recorded, 0.001 * recorded) << batch;
      }
      if (batch != c.batch) continue;
      TrainOptions as_recorded = o;
      as_recorded.model.load.batch.reset();
      EXPECT_EQ(step.peak_bytes, predict_training_step(test::train_data(c.recorded + ".onnx"), as_recorded).peak_bytes);
    }
  }
  // The static export cannot change its batch, and says why in one line.
  TrainOptions o;
  o.device = Device::kCpu;
  o.model.load.batch = 16;
  try {
    predict_training_step(test::train_data("transformer_adamw.onnx"), o);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("export with dynamic_axes={'tokens': {0: 'batch'}}"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("--batch-dim AXIS chooses another"), std::string::npos) << e.what();
  }
}

TEST_P(Recorded, TheBreakdownSumsToThePeak) {
  const auto& [name, options] = GetParam();
  const TrainingStep step = predict_training_step(test::train_data(name + ".onnx"), options);
  EXPECT_EQ(std::accumulate(std::begin(step.breakdown), std::end(step.breakdown), uint64_t{0}), step.peak_bytes);
  EXPECT_TRUE(step.assumptions.empty()) << step.assumptions.front();
  EXPECT_TRUE(step.warnings.empty()) << step.warnings.front();
}

INSTANTIATE_TEST_SUITE_P(TorchCpu, Recorded, ::testing::ValuesIn(test::recorded_steps()),
                         [](const auto& info) { return info.param.name; });

// x [64,256] -> MatMul W1 -> h1 -> Erf -> h2 -> MatMul W2 -> logits [64,10].
// Erf keeps its input; a MatMul keeps its activation input only when its
// weight needs a gradient.
Model erf_mlp() {
  OnnxBuilder b;
  b.input("x", {64, 256});
  b.weight("W1", {256, 256});
  b.weight("W2", {256, 10});
  b.node("MatMul", {"x", "W1"}, {"h1"}, "fc1");
  b.node("Erf", {"h1"}, {"h2"}, "erf");
  b.node("MatMul", {"h2", "W2"}, {"logits"}, "fc2");
  b.output("logits");
  return load_onnx_model_from_bytes(b.bytes(), "erf_mlp.onnx");
}

uint64_t saved_at_end_of_forward(const TrainingStep& step) {
  uint64_t saved = 0;
  int last_forward = 0;
  for (const auto& p : step.timeline) {
    if (p.phase == Phase::kForward) last_forward = p.time;
  }
  for (const auto& a : step.allocations) {
    if (a.category == Category::kSavedActivations && a.alloc_time <= last_forward && last_forward < a.free_time) {
      saved += a.bytes;
    }
  }
  return saved;
}

// A PyTorch export names each scope relative to its parent, and a
// container's numbered children repeat the container's own scope. Issue 47:
// shufflenet's "/stage2/stage2.0/branch1/branch1.0/Conv" was read as
// stage2.0.branch1.branch1.0, a module the model does not have.
TEST(TrainRules, ModulePathsAreTheModelsOwnNames) {
  EXPECT_EQ(module_path("/layer2/layer2.1/conv1/Conv"), "layer2.1.conv1");
  EXPECT_EQ(module_path("/layer2/layer2.1/conv1/Conv", 1), "layer2");
  EXPECT_EQ(module_path("/layer2/layer2.1/conv1/Conv", 2), "layer2.1");
  EXPECT_EQ(module_path("/encoder/layers.0/self_attn/MatMul"), "encoder.layers.0.self_attn");
  EXPECT_EQ(module_path("/stage2/stage2.0/branch1/branch1.0/Conv"), "stage2.0.branch1.0");
  EXPECT_EQ(module_path("/stage2/stage2.0/branch2/branch2.3/Relu"), "stage2.0.branch2.3");
  EXPECT_EQ(module_path("/features/features.3/block/block.0/block.0.0/Conv"), "features.3.block.0.0");
  EXPECT_EQ(module_path("/0/Conv"), "0");
  EXPECT_EQ(module_path("/conv/conv1/Conv"), "conv.conv1");  // a named child whose name starts like its parent's
  EXPECT_EQ(module_path("Conv_3"), "");
}

TEST(TrainRules, AFrozenLinearKeepsNoInput) {
  const Model m = erf_mlp();
  constexpr uint64_t kHidden = 64 * 256 * 4;
  TrainOptions o;
  o.loss = Loss::kNone;
  EXPECT_EQ(saved_at_end_of_forward(predict_training_step(m, o)), 2 * kHidden);  // h1 (Erf), h2 (fc2)
  o.frozen = "^W2$";
  EXPECT_EQ(saved_at_end_of_forward(predict_training_step(m, o)), kHidden);  // h1 only
  o.frozen = "^W1$";
  EXPECT_EQ(saved_at_end_of_forward(predict_training_step(m, o)), kHidden);  // h2 only: Erf needs no backward
  o.frozen = ".";
  const TrainingStep none = predict_training_step(m, o);
  EXPECT_EQ(saved_at_end_of_forward(none), 0u);
  ASSERT_EQ(none.warnings.size(), 1u);
  EXPECT_NE(none.warnings[0].find("no parameter is trainable"), std::string::npos);
}

// Opset 17's LayerNormalization is the same op as the decomposed pattern of
// older exports: it keeps its input and a mean and rstd per row.
TEST(TrainRules, LayerNormalizationAsOneOpKeepsItsInputAndRowStatistics) {
  OnnxBuilder b(17);
  b.input("x", {32, 64});
  b.weight("W", {64, 64});
  b.weight("gamma", {64});
  b.weight("beta", {64});
  b.node("MatMul", {"x", "W"}, {"h"}, "fc");
  b.node("LayerNormalization", {"h", "gamma", "beta"}, {"y"}, "ln");
  b.output("y");
  TrainOptions o;
  o.loss = Loss::kNone;
  const TrainingStep step = predict_training_step(load_onnx_model_from_bytes(b.bytes(), "ln.onnx"), o);
  EXPECT_TRUE(step.assumptions.empty()) << step.assumptions.front();
  EXPECT_EQ(saved_at_end_of_forward(step), 32u * 64 * 4 + 2 * 32 * 4);
}

TEST(TrainRules, OptimizerStatesFollowEachOptimizer) {
  const Model m = erf_mlp();
  const uint64_t weights = (256 * 256 + 256 * 10) * 4;
  auto steady = [&](Optimizer opt) {
    TrainOptions o;
    o.optimizer = opt;
    return predict_training_step(m, o).steady_state_bytes;
  };
  EXPECT_EQ(steady(Optimizer::kSgd), weights);
  EXPECT_EQ(steady(Optimizer::kSgdMomentum), 2 * weights);
  EXPECT_EQ(steady(Optimizer::kAdamW), 3 * weights + 2 * 4);  // exp_avg, exp_avg_sq, a float32 step each
  // 8-bit Adam: W1 (65,536 values) in 1 byte per state plus one fp32 absmax
  // per 256; W2 (2,560 < 4,096) stays fp32 with its step.
  EXPECT_EQ(steady(Optimizer::kAdam8bit), weights + 2 * (65536 + 65536 / 256 * 4) + 2 * 2560 * 4 + 4);
  // Adafactor: row and column statistics of each matrix, and a step.
  EXPECT_EQ(steady(Optimizer::kAdafactor), weights + (256 + 256) * 4 + 4 + (256 + 10) * 4 + 4);
}

TEST(TrainRules, TheFirstStepCreatesTheStatesAndZeroedGradsStay) {
  const Model m = erf_mlp();
  TrainOptions o;
  o.optimizer = Optimizer::kAdam;
  const TrainingStep steady = predict_training_step(m, o);
  o.first_step = true;
  const TrainingStep first = predict_training_step(m, o);
  const uint64_t states = 2 * (256 * 256 + 256 * 10) * 4 + 2 * 4;
  EXPECT_EQ(first.timeline.front().live_bytes + states, steady.timeline.front().live_bytes);
  EXPECT_EQ(first.steady_state_bytes, steady.steady_state_bytes);
  o.first_step = false;
  o.grads_set_to_none = false;
  const TrainingStep zeroed = predict_training_step(m, o);
  EXPECT_EQ(zeroed.timeline.front().live_bytes, steady.timeline.front().live_bytes + (256 * 256 + 256 * 10) * 4);
}

// A graph whose output is a constant: nothing to train, and the loss is
// still added (a regression: the loss once read a value after the values
// had moved).
TEST(TrainRules, AConstantOutputTrainsNothingAndDoesNotCrash) {
  OnnxBuilder b;
  b.input("x", {4});
  b.weight("w", {4});
  b.node("Add", {"x", "w"}, {"y"}, "add");
  b.node("Relu", {"y"}, {"out"}, "relu");
  b.output("out");
  for (int i = 0; i < 40; ++i) b.weight("unused" + std::to_string(i), {1});  // more values: the vector grows
  const Model m = load_onnx_model_from_bytes(b.bytes(), "const.onnx");
  TrainOptions o;
  o.precision = Precision::kAmpBf16;
  const TrainingStep step = predict_training_step(m, o);
  EXPECT_GT(step.peak_bytes, 0u);
  EXPECT_EQ(std::accumulate(std::begin(step.breakdown), std::end(step.breakdown), uint64_t{0}), step.peak_bytes);
}

TEST(TrainRules, BatchNormOnRunningStatisticsIsAnInferenceExport) {
  OnnxBuilder b;
  b.input("x", {8, 16, 32, 32});
  for (const char* w : {"gamma", "beta", "mean", "var"}) b.weight(w, {16});
  b.node("BatchNormalization", {"x", "gamma", "beta", "mean", "var"}, {"y"}, "bn");
  b.output("y");
  const Model m = load_onnx_model_from_bytes(b.bytes(), "eval.onnx");
  TrainOptions o;
  o.loss = Loss::kMse;
  const TrainingStep step = predict_training_step(m, o);
  ASSERT_EQ(step.warnings.size(), 1u);
  EXPECT_NE(step.warnings[0].find("exported in inference mode"), std::string::npos);
}

TEST(TrainRules, UnknownShapesAndBadRegexesAreOneLineErrors) {
  OnnxBuilder b;
  b.input("x", {{"batch"}, 16});
  b.weight("W", {16, 4});
  b.node("MatMul", {"x", "W"}, {"y"}, "fc");
  b.output("y");
  const Model m = load_onnx_model_from_bytes(b.bytes(), "symbolic.onnx");
  try {
    predict_training_step(m, TrainOptions{});
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--dim NAME=VALUE"), std::string::npos) << e.what();
  }
  TrainOptions o;
  o.frozen = "(";
  EXPECT_THROW(predict_training_step(erf_mlp(), o), InputError);
}

// A run FIRST..LAST is one segment; a run backwards, a module that is not
// there, or runs that overlap are one-line errors naming the entry.
TEST(TrainRules, CheckpointRunsAreCheckedAndOneSegment) {
  const std::string resnet = test::train_data("resnet18_sgd.onnx");
  TrainOptions o;
  o.device = Device::kCpu;
  o.optimizer = Optimizer::kSgdMomentum;
  auto error = [&](std::vector<std::string> checkpoint) {
    o.checkpoint = std::move(checkpoint);
    try {
      predict_training_step(resnet, o);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error({"layer2..layer1"}).find("'layer2' runs after 'layer1'"), std::string::npos);
  EXPECT_NE(error({"conv1..layer9"}).find("no node belongs to module 'layer9'"), std::string::npos);
  EXPECT_NE(error({"conv1..layer1", "layer1.0"}).find("overlaps"), std::string::npos);
  // One run keeps less than its modules checkpointed one by one: the
  // tensors between them are not kept.
  o.checkpoint = {"conv1..maxpool"};
  const uint64_t run = predict_training_step(resnet, o).peak_bytes;
  o.checkpoint = {"conv1", "bn1", "relu", "maxpool"};
  EXPECT_LT(run, predict_training_step(resnet, o).peak_bytes);
}

// The step as a trace: its allocations, replayed, reach the predicted peak.
TEST(TrainTrace, TheTraceHoldsThePredictedPeak) {
  const auto recorded = test::recorded_steps().front();
  const TrainingStep step = predict_training_step(test::train_data(recorded.name + ".onnx"), recorded.options);
  const trace::Trace t = step_trace(step);
  int64_t live = 0, peak = 0;
  for (const auto& e : t.events) {
    live += e.action == trace::Action::kAlloc ? e.size : -e.size;
    peak = std::max(peak, live);
  }
  EXPECT_EQ(static_cast<uint64_t>(peak), step.peak_bytes);
  EXPECT_EQ(t.events.back().total_allocated, live);
}

}  // namespace
}  // namespace gpumem::train

namespace gpumem::train {
namespace {

TEST(TorchVersions, ReleasesParseAndOlderOnesAreRefused) {
  EXPECT_EQ(parse_torch_version("1.13.0a0")->str(), "1.13");
  EXPECT_EQ(parse_torch_version("2.4.1+cu121")->str(), "2.4");
  EXPECT_EQ(parse_torch_version("2")->str(), "2.0");
  EXPECT_FALSE(parse_torch_version("1.12").has_value());
  EXPECT_FALSE(parse_torch_version("latest").has_value());
  EXPECT_FALSE(parse_torch_version("").has_value());
  EXPECT_FALSE(parse_torch_version("-2.1").has_value());
}

// torch 1.13 and 2.0's foreach Adam keep the denominator beside the square
// roots (recorded: resnet18 AdamW at batch 4, m_resnet18_adamw_foreach);
// 2.1 adds eps in place. The difference is one more list of every
// trainable parameter's size.
TEST(TorchVersions, ForeachAdamKeepsTwoListsBefore21) {
  TrainOptions o;
  o.device = Device::kCpu;
  o.optimizer = Optimizer::kAdamW;
  o.foreach = true;
  o.model.load.batch = 4;
  const std::string resnet = test::train_data("resnet18_sgd.onnx");
  o.torch = TorchVersion{1, 13};
  const TrainingStep old_step = predict_training_step(resnet, o);
  o.torch.reset();
  const TrainingStep current = predict_training_step(resnet, o);
  EXPECT_EQ(old_step.peak_phase, Phase::kOptimizer);
  const auto recorded = test::recorded_facts("m_resnet18_adamw_foreach")["recorded_peak_bytes"].get<double>();
  EXPECT_NEAR(static_cast<double>(old_step.peak_bytes), recorded, 1e-3 * recorded);
  EXPECT_GT(old_step.peak_bytes, current.peak_bytes);
}

}  // namespace
}  // namespace gpumem::train
