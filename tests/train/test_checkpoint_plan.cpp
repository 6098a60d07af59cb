// Activation checkpointing: the chain dynamic program against brute force,
// the simulation of torch.utils.checkpoint against recorded steps, and the
// plans `fit` makes.
#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <tuple>

#include <gtest/gtest.h>

#include "gpumem/model/onnx_loader.h"
#include "gpumem/train/checkpoint_plan.h"
#include "gpumem/train/fit.h"
#include "train/recorded_steps.h"

namespace gpumem::train {
namespace {

// One plan under the semantics of solve_chain: label[i] is 0 (unit i runs
// normally), 1 (it starts a checkpointed segment) or 2 (it continues the
// previous unit's); its cost and smallest margin over the constraints
// (negative: infeasible), or nullopt when the labels are not a plan.
struct Evaluation {
  uint64_t cost = 0;
  int64_t margin = std::numeric_limits<int64_t>::max();
};
std::optional<Evaluation> evaluate(const ChainProblem& p, const std::vector<int>& label) {
  const size_t n = p.cost.size();
  Evaluation e;
  auto need = [&](int64_t saved, int64_t need) {
    if (need > kNoNeed) e.margin = std::min(e.margin, saved - need);
  };
  int64_t saving = 0;
  need(0, p.need[0]);
  size_t start = 0;    // of the current segment
  int64_t before = 0;  // savings before it
  for (size_t i = 0; i < n; ++i) {
    if (label[i] == 2) {
      if (i == 0 || label[i - 1] == 0 || !p.joins_previous[i] || i - start + 1 > static_cast<size_t>(p.max_segment))
        return std::nullopt;
    } else {
      start = i;
      before = saving;
    }
    const int prev = start == 0 ? 0 : label[start - 1] != 0;
    if (label[i] == 0) {
      need(saving, p.need_backward[i]);
      saving += p.normal[i][static_cast<size_t>(i == 0 ? 0 : label[i - 1] != 0)];
    } else {
      need(before, p.need_backward[i]);
      saving += p.in_segment[i][i - start][static_cast<size_t>(prev)];
      e.cost += p.cost[i];
    }
    need(saving, p.need[i + 1]);
  }
  return e;
}

// Every plan, for chains of up to 8 units.
template <typename Visit>
void each_plan(size_t n, Visit visit) {
  std::vector<int> label(n, 0);
  while (true) {
    visit(label);
    size_t i = 0;
    while (i < n && label[i] == 2) label[i++] = 0;
    if (i == n) return;
    ++label[i];
  }
}

ChainSolution brute_force(const ChainProblem& p) {
  ChainSolution best;
  each_plan(p.cost.size(), [&](const std::vector<int>& label) {
    const auto e = evaluate(p, label);
    if (e && e->margin >= 0 && (!best.feasible || e->cost < best.cost)) {
      best.feasible = true;
      best.cost = e->cost;
    }
  });
  return best;
}

// A random chain: checkpointing mostly frees memory, a boundary kept can
// cost some, and a run frees the boundaries inside it.
ChainProblem random_chain(std::mt19937_64& rng, size_t n, int64_t unit) {
  ChainProblem p;
  p.max_segment = 1 + static_cast<int>(rng() % 4);
  p.need.push_back(rng() % 8 == 0 ? static_cast<int64_t>(rng() % 10) * unit : -static_cast<int64_t>(rng() % 30) * unit);
  for (size_t i = 0; i < n; ++i) {
    p.cost.push_back(1 + rng() % 100);
    p.joins_previous.push_back(i > 0 && rng() % 4 != 0);
    const auto r = [&](uint64_t m) { return static_cast<int64_t>(rng() % m) * unit; };
    const int64_t inner = r(50), boundary = r(20), kept_input = r(10);
    p.normal.push_back({0, -boundary});
    p.in_segment.emplace_back();
    for (size_t j = 0; j < static_cast<size_t>(p.max_segment) && j <= i; ++j) {
      p.in_segment.back().push_back({j == 0 ? inner - boundary : inner + kept_input, inner});
    }
    p.need.push_back(r(100) - 40 * unit);
    p.need_backward.push_back(rng() % 3 == 0 ? kNoNeed : r(100) - 50 * unit);
  }
  return p;
}

// The plan a solution describes, as labels.
std::vector<int> labels_of(const ChainSolution& s) {
  std::vector<int> label(s.checkpointed.size(), 0);
  for (size_t i = 0; i < label.size(); ++i) label[i] = s.checkpointed[i] ? (s.starts_segment[i] ? 1 : 2) : 0;
  return label;
}

TEST(ChainCheckpointing, TheDynamicProgramMatchesBruteForce) {
  std::mt19937_64 rng(12);
  int feasible = 0, with_runs = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const ChainProblem p = random_chain(rng, 1 + rng() % 8, 1);
    const ChainSolution dp = solve_chain(p);
    const ChainSolution bf = brute_force(p);
    ASSERT_EQ(dp.feasible, bf.feasible) << trial;
    if (!bf.feasible) continue;
    ++feasible;
    EXPECT_EQ(dp.cost, bf.cost) << trial;
    // The plan it returns is a plan, has that cost and meets every constraint.
    const auto labels = labels_of(dp);
    const auto e = evaluate(p, labels);
    ASSERT_TRUE(e.has_value()) << trial;
    EXPECT_GE(e->margin, 0) << trial;
    EXPECT_EQ(e->cost, dp.cost) << trial;
    with_runs += std::count(labels.begin(), labels.end(), 2) > 0 ? 1 : 0;
  }
  EXPECT_GT(feasible, 600);
  EXPECT_GT(with_runs, 100);  // runs of several units are chosen, not only single ones
}

// Bytes as large as real models': the program counts savings in steps of
// `resolution` bytes, so it may only miss a plan whose margin is within a
// step per unit; any other optimum it must find.
TEST(ChainCheckpointing, LargeSavingsAreRoundedSafely) {
  std::mt19937_64 rng(99);
  int compared = 0;
  for (int trial = 0; trial < 150; ++trial) {
    constexpr int64_t kMiB = 1 << 20;
    const size_t n = 1 + rng() % 7;
    ChainProblem p = random_chain(rng, n, 10 * kMiB);
    for (auto& row : p.in_segment)
      for (auto& v : row) v[0] += static_cast<int64_t>(rng() % kMiB);  // not multiples of any step
    const ChainSolution dp = solve_chain(p);
    const ChainSolution bf = brute_force(p);
    if (dp.feasible) {
      // What it returns is feasible for the exact savings, and no cheaper
      // than the true optimum.
      ASSERT_TRUE(bf.feasible);
      const auto e = evaluate(p, labels_of(dp));
      ASSERT_TRUE(e.has_value());
      EXPECT_GE(e->margin, 0) << trial;
      EXPECT_GE(dp.cost, bf.cost);
    }
    if (!bf.feasible) continue;
    // The true optimum's smallest margin: when it exceeds what rounding can
    // lose, the program finds a plan as cheap.
    int64_t margin = std::numeric_limits<int64_t>::max();
    each_plan(n, [&](const std::vector<int>& label) {
      const auto e = evaluate(p, label);
      if (e && e->margin >= 0 && e->cost == bf.cost) margin = std::min(margin, e->margin);
    });
    if (margin > static_cast<int64_t>(n + 1) * dp.resolution) {
      ++compared;
      EXPECT_TRUE(dp.feasible) << trial;
      EXPECT_EQ(dp.cost, bf.cost) << trial;
    }
  }
  EXPECT_GT(compared, 20);
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
    // Calls in backward are the recomputed ones (none for a run without
    // convolutions: the phase is then absent).
    const auto backward = facts["op_calls"]["all_events"].value("backward", nlohmann::json::object());
    if (c.base == "resnet18_sgd") {
      EXPECT_EQ(recomputed["convolution"], backward.value("aten::convolution", 0));
    } else {
      EXPECT_EQ(recomputed["linear"], backward.value("aten::linear", 0));
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

// Issue 46: every run a plan names is one the model's own forward calls in a
// row (a Sequential's children, ResNet's stem), never siblings with other
// ops between them, such as a Bottleneck's bn2 and bn3 around its shared
// relu: at every depth and budget of resnet50, each "FIRST..LAST" covers
// units whose ops follow one another.
TEST(FitTraining, EveryRunIsOneTheForwardCallsInARow) {
  const std::string resnet50 = std::string(GPUMEM_SOURCE_DIR) + "/examples/models/resnet50.onnx";
  LoadOptions load;
  load.batch = 8;
  const Model model = load_onnx_model(resnet50, load);
  TrainOptions options;
  options.model.load = load;
  const TrainingStep base = predict_training_step(model, options);
  int runs = 0;
  for (int percent = 30; percent <= 90; percent += 10) {
    const CheckpointPlan plan = plan_checkpointing(model, options, base.peak_bytes / 100 * percent);
    const auto units = chain_units(base, plan.depth);
    for (const auto& entry : plan.modules) {
      const size_t dots = entry.find("..");
      if (dots == std::string::npos) continue;
      ++runs;
      const auto at = [&](const std::string& name) {
        return std::find_if(units.begin(), units.end(), [&](const ChainUnit& u) { return u.module == name; });
      };
      auto first = at(entry.substr(0, dots));
      const auto last = at(entry.substr(dots + 2));
      ASSERT_NE(first, units.end()) << entry;
      ASSERT_NE(last, units.end()) << entry;
      for (auto u = first; u != last; ++u) {
        EXPECT_EQ(std::next(u)->first_op, u->last_op + 1) << entry << " at " << percent << "%";
        EXPECT_EQ(std::next(u)->parent, u->parent) << entry;
      }
    }
  }
  EXPECT_GT(runs, 0);  // the property was exercised

  // The rule itself, on resnet50's own modules (this export folds BatchNorm
  // into the convolutions and names the Bottleneck's shared relu's three
  // calls relu, relu_1, relu_2): the stages follow one another; conv1 and
  // conv2 do not (the shared relu runs between), and neither the relu nor
  // its later calls, which are no module of the model, are units at all.
  const auto depth1 = chain_units(base, 1);
  const auto unit = [](const std::vector<ChainUnit>& units, const std::string& name) {
    const auto it = std::find_if(units.begin(), units.end(), [&](const ChainUnit& u) { return u.module == name; });
    std::string known;
    for (const auto& u : units)
      known += u.module + "[" + std::to_string(u.first_op) + "," + std::to_string(u.last_op) + "] ";
    EXPECT_NE(it, units.end()) << name << " among " << known;
    return it == units.end() ? ChainUnit{} : *it;
  };
  EXPECT_TRUE(wrappable_after(unit(depth1, "layer1"), unit(depth1, "layer2")));
  EXPECT_FALSE(wrappable_after(unit(depth1, "fc"), unit(depth1, "layer1")));
  const auto depth3 = chain_units(base, 3);
  EXPECT_FALSE(wrappable_after(unit(depth3, "layer3.1.conv1"), unit(depth3, "layer3.1.conv2")));
  for (const auto& u : depth3) EXPECT_EQ(u.module.find(".relu"), std::string::npos) << u.module;
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

namespace gpumem::train {
namespace {

// Goal: fit reaches every budget a real checkpointing run reached on the
// same model and batch: torch.utils.checkpoint on named modules, fit's own
// plans, and checkpoint_sequential at 2, 3 and 4 segments (whose first
// segment is resnet18's stem, conv1..maxpool).
TEST(FitTraining, ReachesEveryBudgetARecordedCheckpointingRunReached) {
  for (const auto& [name, base, optimizer] : std::vector<std::tuple<std::string, std::string, Optimizer>>{
           {"resnet18_sgd_ckpt", "resnet18_sgd", Optimizer::kSgdMomentum},
           {"resnet18_sgd_fit282", "resnet18_sgd", Optimizer::kSgdMomentum},
           {"m_resnet18_cseq2", "resnet18_sgd", Optimizer::kSgdMomentum},
           {"m_resnet18_cseq3", "resnet18_sgd", Optimizer::kSgdMomentum},
           {"m_resnet18_cseq4", "resnet18_sgd", Optimizer::kSgdMomentum},
           {"transformer_adamw_ckpt", "transformer_adamw", Optimizer::kAdamW},
           {"transformer_adamw_fit100", "transformer_adamw", Optimizer::kAdamW}}) {
    const auto facts = test::recorded_facts(name);
    FitRequest request;
    request.options.optimizer = optimizer;
    request.options.device = Device::kCpu;
    request.keep = {Lever::kPrecision, Lever::kOptimizer,
                    Lever::kBatch};  // as recorded: fp32, the same optimizer and batch
    request.budget = facts["recorded_peak_bytes"].get<uint64_t>();
    const FitResult fit = fit_training(test::train_data(base + ".onnx"), request);
    EXPECT_TRUE(fit.fits) << name << ": closest " << fit.predicted_peak << " for " << request.budget;
    EXPECT_LE(fit.predicted_peak, request.budget) << name;
  }
}

}  // namespace
}  // namespace gpumem::train
