// Activation checkpointing: the chain dynamic program against brute force,
// the simulation of torch.utils.checkpoint against recorded steps, and the
// plans `fit` makes.
#include <limits>
#include <map>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "gpumem/model/onnx_loader.h"
#include "gpumem/train/checkpoint_plan.h"
#include "gpumem/train/fit.h"
#include "train/recorded_steps.h"

namespace gpumem::train {
namespace {

// One plan (bit i: unit i checkpointed) under the semantics of
// solve_chain: its cost and its smallest margin over the constraints
// (negative: infeasible).
struct Evaluation {
  uint64_t cost = 0;
  int64_t margin = std::numeric_limits<int64_t>::max();
};
Evaluation evaluate(const ChainProblem& p, uint32_t mask) {
  Evaluation e;
  int64_t saving = 0;
  for (size_t i = 0; i < p.cost.size(); ++i) {
    const int cur = (mask >> i) & 1;
    const int prev = i == 0 ? 0 : (mask >> (i - 1)) & 1;
    saving += p.saving[i][static_cast<size_t>(prev * 2 + cur)];
    e.cost += cur ? p.cost[i] : 0;
    e.margin = std::min(e.margin, saving - p.need[i]);
  }
  return e;
}

// Every subset.
ChainSolution brute_force(const ChainProblem& p) {
  ChainSolution best;
  if (p.need_before > 0) return best;
  for (uint32_t mask = 0; mask < (1u << p.cost.size()); ++mask) {
    const Evaluation e = evaluate(p, mask);
    if (e.margin >= 0 && (!best.feasible || e.cost < best.cost)) {
      best.feasible = true;
      best.cost = e.cost;
    }
  }
  return best;
}

TEST(ChainCheckpointing, TheDynamicProgramMatchesBruteForce) {
  std::mt19937_64 rng(12);
  int feasible = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    ChainProblem p;
    const size_t n = 1 + rng() % 10;
    for (size_t i = 0; i < n; ++i) {
      p.cost.push_back(1 + rng() % 100);
      // Checkpointing mostly frees memory; a boundary can cost some.
      const int64_t inner = static_cast<int64_t>(rng() % 50);
      const int64_t boundary = static_cast<int64_t>(rng() % 20);
      p.saving.push_back({0, inner - boundary, static_cast<int64_t>(rng() % 10), inner});
      p.need.push_back(static_cast<int64_t>(rng() % 120) - 30);
    }
    const ChainSolution dp = solve_chain(p);
    const ChainSolution bf = brute_force(p);
    ASSERT_EQ(dp.feasible, bf.feasible) << trial;
    if (!bf.feasible) continue;
    ++feasible;
    EXPECT_EQ(dp.cost, bf.cost) << trial;
    // The plan it returns has that cost and meets every constraint.
    int64_t saving = 0;
    uint64_t cost = 0;
    for (size_t i = 0; i < n; ++i) {
      const int cur = dp.checkpointed[i], prev = i == 0 ? 0 : dp.checkpointed[i - 1];
      saving += p.saving[i][static_cast<size_t>(prev * 2 + cur)];
      cost += cur ? p.cost[i] : 0;
      EXPECT_GE(saving, p.need[i]) << trial;
    }
    EXPECT_EQ(cost, dp.cost);
  }
  EXPECT_GT(feasible, 300);
}

// Bytes as large as real models': the program counts savings in steps of
// `resolution` bytes, so it may only miss a plan whose margin is within a
// step per unit; any other optimum it must find.
TEST(ChainCheckpointing, LargeSavingsAreRoundedSafely) {
  std::mt19937_64 rng(99);
  int compared = 0;
  for (int trial = 0; trial < 200; ++trial) {
    ChainProblem p;
    const size_t n = 1 + rng() % 9;
    constexpr int64_t kMiB = 1 << 20;
    for (size_t i = 0; i < n; ++i) {
      p.cost.push_back(1 + rng() % 1000);
      const int64_t inner = static_cast<int64_t>(rng() % 600) * kMiB + static_cast<int64_t>(rng() % kMiB);
      const int64_t boundary = static_cast<int64_t>(rng() % 100) * kMiB;
      p.saving.push_back({0, inner - boundary, static_cast<int64_t>(rng() % 50) * kMiB, inner});
      p.need.push_back(static_cast<int64_t>(rng() % 1500) * kMiB - 400 * kMiB);
    }
    const ChainSolution dp = solve_chain(p);
    const ChainSolution bf = brute_force(p);
    if (dp.feasible) {
      // What it returns is feasible for the exact savings, and no cheaper
      // than the true optimum.
      ASSERT_TRUE(bf.feasible);
      EXPECT_GE(dp.cost, bf.cost);
    }
    if (!bf.feasible) continue;
    // The true optimum's smallest margin: when it exceeds what rounding can
    // lose, the program finds a plan as cheap.
    int64_t margin = std::numeric_limits<int64_t>::max();
    for (uint32_t mask = 0; mask < (1u << n); ++mask) {
      const Evaluation e = evaluate(p, mask);
      if (e.margin >= 0 && e.cost == bf.cost) margin = std::min(margin, e.margin);
    }
    if (margin > static_cast<int64_t>(n + 1) * dp.resolution) {
      ++compared;
      EXPECT_TRUE(dp.feasible) << trial;
      EXPECT_EQ(dp.cost, bf.cost) << trial;
    }
  }
  EXPECT_GT(compared, 40);
}

// torch.utils.checkpoint on named modules, recorded with torch 1.13: the
// predicted peak, and the forward ops backward runs again.
TEST(CheckpointedSteps, MatchTheRecordedSteps) {
  for (const auto& [name, base, optimizer] : std::vector<std::tuple<std::string, std::string, Optimizer>>{
           {"resnet18_sgd_ckpt", "resnet18_sgd", Optimizer::kSgdMomentum},
           {"transformer_adamw_ckpt", "transformer_adamw", Optimizer::kAdamW}}) {
    const auto facts = test::recorded_facts(name);
    TrainOptions o;
    o.device = Device::kCpu;
    o.optimizer = optimizer;
    for (const auto& m : facts["checkpoint"]) o.checkpoint.push_back(m.get<std::string>());
    const TrainingStep step = predict_training_step(test::train_data(base + ".onnx"), o);
    const double recorded = facts["recorded_peak_bytes"].get<double>();
    EXPECT_NEAR(static_cast<double>(step.peak_bytes), recorded, 0.05 * recorded) << name;
    std::map<std::string, int> recomputed;
    for (int k : step.recomputed_ops) recomputed[step.op_kinds[static_cast<size_t>(k)]] += 1;
    const auto& backward = facts["op_calls"]["all_events"]["backward"];
    const auto& forward = facts["op_calls"]["all_events"]["forward"];
    if (name == "resnet18_sgd_ckpt") {
      EXPECT_EQ(recomputed["convolution"], backward["aten::convolution"].get<int>());
    } else {
      EXPECT_EQ(recomputed["linear"], backward["aten::linear"].get<int>());
      // bmm in backward: the recomputed ones plus two per bmm's gradient.
      EXPECT_EQ(recomputed["MatMul"], backward["aten::bmm"].get<int>() - 2 * forward["aten::bmm"].get<int>());
    }
  }
}

// The plans `fit` makes, applied to the real models (torch.utils.checkpoint
// at the named modules, tools/record_checkpointed.py) and recorded: the
// real step fits the budget, within 5% of the prediction, and runs again
// the forward ops the plan says.
TEST(FitTraining, ThePlansRunInPyTorchWithinTheBudget) {
  struct Case {
    std::string recording, base;
    Optimizer optimizer;
    uint64_t budget;
  };
  for (const Case& c : {Case{"resnet18_sgd_fit282", "resnet18_sgd", Optimizer::kSgdMomentum, 282u << 20},
                        Case{"transformer_adamw_fit100", "transformer_adamw", Optimizer::kAdamW, 100u << 20}}) {
    FitRequest request;
    request.options.optimizer = c.optimizer;
    request.options.device = Device::kCpu;
    request.keep = {Lever::kPrecision, Lever::kOptimizer};  // as recorded: fp32, the same optimizer
    request.budget = c.budget;
    const FitResult fit = fit_training(test::train_data(c.base + ".onnx"), request);
    const auto facts = test::recorded_facts(c.recording);
    std::vector<std::string> recorded_modules;
    for (const auto& m : facts["checkpoint"]) recorded_modules.push_back(m.get<std::string>());
    ASSERT_EQ(fit.checkpoint.modules, recorded_modules) << c.recording << ": re-record it with this plan";
    const auto recorded = facts["recorded_peak_bytes"].get<uint64_t>();
    EXPECT_LE(recorded, c.budget) << c.recording;
    EXPECT_NEAR(static_cast<double>(fit.predicted_peak), static_cast<double>(recorded), 0.05 * recorded) << c.recording;
    std::map<std::string, int> recomputed;
    for (int k : fit.checkpoint.step.recomputed_ops)
      recomputed[fit.checkpoint.step.op_kinds[static_cast<size_t>(k)]] += 1;
    const auto& backward = facts["op_calls"]["all_events"]["backward"];
    if (c.base == "resnet18_sgd") {
      EXPECT_EQ(recomputed["convolution"], backward["aten::convolution"].get<int>());
    } else {
      EXPECT_EQ(recomputed["linear"], backward["aten::linear"].get<int>());
    }
  }
}

TEST(FitTraining, ACheckpointPlanFitsTheBudgetItWasMadeFor) {
  const auto recorded = test::recorded_steps().front();  // resnet18, sgd-momentum, cpu
  FitRequest request;
  request.options = recorded.options;
  request.keep = {Lever::kPrecision, Lever::kOptimizer};
  request.budget = 280u << 20;  // 294.62 MiB without checkpointing
  const FitResult fit = fit_training(test::train_data(recorded.name + ".onnx"), request);
  ASSERT_TRUE(fit.fits);
  EXPECT_LE(fit.predicted_peak, request.budget);
  ASSERT_FALSE(fit.checkpoint.modules.empty());
  EXPECT_GT(fit.checkpoint.recompute_fraction, 0.0);
  EXPECT_LT(fit.checkpoint.recompute_fraction, 1.0);
  // The plan, simulated on its own, gives the same peak.
  TrainOptions o = recorded.options;
  o.checkpoint = fit.checkpoint.modules;
  EXPECT_EQ(predict_training_step(test::train_data(recorded.name + ".onnx"), o).peak_bytes, fit.predicted_peak);
  // Checkpointing everything it could choose from would recompute more.
  const auto units = chain_units(fit.checkpoint.step, fit.checkpoint.depth);
  uint64_t all = 0;
  for (const auto& u : units) all += u.flops;
  EXPECT_LT(fit.checkpoint.recompute_flops, all);
}

// At a budget equal to a recorded step's peak, the largest batch without
// checkpointing is the recorded one (the next does not fit), and
// checkpointing lets a larger one fit.
TEST(FitTraining, TheLargestBatchIsTheRecordedOneAtItsOwnPeak) {
  for (const auto& recorded : test::recorded_steps()) {
    const auto facts = test::recorded_facts(recorded.name);
    if (facts["config"]["model"].get<std::string>().find("torchvision") == std::string::npos)
      continue;  // [seq, batch] inputs
    FitRequest request;
    request.options = recorded.options;
    request.budget = facts["recorded_peak_bytes"].get<uint64_t>();
    request.keep = {Lever::kPrecision, Lever::kOptimizer};
    request.max_batch = true;
    const FitResult fit = fit_training(test::train_data(recorded.name + ".onnx"), request);
    const auto batch = facts["config"]["batch"].get<int64_t>();
    EXPECT_TRUE(fit.fits) << recorded.name;
    EXPECT_EQ(fit.max_batch_without_checkpointing, batch) << recorded.name;
    EXPECT_GE(fit.batch, batch) << recorded.name;
    ASSERT_TRUE(fit.next_batch_peak.has_value()) << recorded.name;
    EXPECT_GT(*fit.next_batch_peak, request.budget) << recorded.name;
    TrainOptions next = recorded.options;
    next.model.load.batch = batch + 1;
    EXPECT_GT(predict_training_step(test::train_data(recorded.name + ".onnx"), next).peak_bytes, request.budget);
  }
}

}  // namespace
}  // namespace gpumem::train
