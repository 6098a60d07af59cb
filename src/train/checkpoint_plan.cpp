#include "gpumem/train/checkpoint_plan.h"

#include <algorithm>
#include <limits>
#include <map>

namespace gpumem::train {

std::vector<ChainUnit> chain_units(const TrainingStep& step, int depth) {
  // Each module's first and last op; a module is a unit when no op of
  // another module falls in between (ops of no module, such as the casts
  // autocast inserts, may).
  std::map<std::string, std::pair<int, int>> span;
  std::vector<std::string> path(step.op_names.size());
  for (size_t k = 0; k < step.op_names.size(); ++k) {
    // An op directly in a shallower module ("/layer1/layer1.0/Add" at
    // depth 3) belongs to no unit of this depth: a unit must hold every op
    // its module path names.
    const std::string& name = step.op_names[k];
    const auto scopes = static_cast<int>(std::count(name.begin(), name.end(), '/')) - 1;
    path[k] = scopes >= depth ? module_path(name, depth) : std::string();
    if (path[k].empty()) continue;
    auto [it, fresh] = span.try_emplace(path[k], static_cast<int>(k), static_cast<int>(k));
    if (!fresh) it->second.second = static_cast<int>(k);
  }
  std::vector<ChainUnit> units;
  for (const auto& [module, range] : span) {
    bool contiguous = true;
    uint64_t flops = 0;
    for (int k = range.first; k <= range.second && contiguous; ++k) {
      contiguous = path[static_cast<size_t>(k)].empty() || path[static_cast<size_t>(k)] == module;
      flops += step.op_flops[static_cast<size_t>(k)];
    }
    if (contiguous && flops > 0) units.push_back({module, range.first, range.second, flops});
  }
  std::sort(units.begin(), units.end(), [](const auto& a, const auto& b) { return a.first_op < b.first_op; });
  return units;
}

ChainSolution solve_chain(const ChainProblem& p) {
  // Savings are counted in steps of q bytes, rounded down (so a plan found
  // never saves less than the model says), over the range the constraints
  // can tell apart: from the smallest need to the largest need plus every
  // saving that could still be lost later. q = 1 (exact) while that range
  // has at most kSteps values; kSteps shrinks with the chain's length to
  // bound the work (about 2^22 states).
  ChainSolution out;
  if (p.need_before > 0) return out;
  const size_t n = p.cost.size();
  const int64_t kSteps = std::clamp<int64_t>((int64_t{1} << 22) / static_cast<int64_t>(std::max<size_t>(n, 1)),
                                             int64_t{1} << 12, int64_t{1} << 20);
  if (n == 0) {
    out.feasible = true;
    return out;
  }
  // A need far below anything reachable (no moment of the step has that
  // prefix stored) constrains nothing.
  constexpr int64_t kNoNeed = std::numeric_limits<int64_t>::min() / 8;
  int64_t lo = 0, hi = 0, losses = 0;
  for (size_t i = 0; i < n; ++i) {
    for (int64_t v : p.saving[i]) losses += std::max<int64_t>(0, -v);
  }
  for (size_t i = 0; i < n; ++i) {
    if (p.need[i] <= kNoNeed) continue;
    lo = std::min(lo, p.need[i]);
    hi = std::max(hi, p.need[i]);
  }
  lo -= losses;
  hi += losses;
  const int64_t q = std::max<int64_t>(1, (hi - lo + kSteps - 1) / kSteps);
  auto floor_div = [](int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); };
  // top: the largest need rounded up, so that clamping never fails one.
  const int64_t base = floor_div(lo, q), top = floor_div(hi, q) + 1;
  const auto width = static_cast<size_t>(top - base + 1);
  constexpr uint64_t kNone = std::numeric_limits<uint64_t>::max();
  // cost[cur][s]: the least recompute reaching savings step s with the
  // last unit's choice cur; choice[i][cur][s] remembers the previous state.
  std::vector<std::array<std::vector<uint64_t>, 2>> cost(2);
  struct From {
    int32_t s = -1;
    int8_t prev = 0;
  };
  std::vector<std::array<std::vector<From>, 2>> from(n);
  std::array<std::vector<uint64_t>, 2> now{std::vector<uint64_t>(width, kNone), std::vector<uint64_t>(width, kNone)};
  const auto zero = static_cast<size_t>(-base);
  now[0][zero] = 0;  // nothing saved, "previous unit" not checkpointed
  bool any = true;
  for (size_t i = 0; i < n && any; ++i) {
    std::array<std::vector<uint64_t>, 2> next{std::vector<uint64_t>(width, kNone), std::vector<uint64_t>(width, kNone)};
    from[i][0].assign(width, From{});
    from[i][1].assign(width, From{});
    const int64_t need = p.need[i] <= kNoNeed ? base : (p.need[i] + q - 1 - (p.need[i] < 0 ? q - 1 : 0)) / q;  // ceil
    any = false;
    for (int prev = 0; prev < 2; ++prev) {
      if (i == 0 && prev == 1) continue;
      for (size_t s = 0; s < width; ++s) {
        if (now[static_cast<size_t>(prev)][s] == kNone) continue;
        for (int cur = 0; cur < 2; ++cur) {
          int64_t t = static_cast<int64_t>(s) + base + floor_div(p.saving[i][static_cast<size_t>(prev * 2 + cur)], q);
          if (t < need) continue;
          t = std::clamp(t, base, top);
          const auto slot = static_cast<size_t>(t - base);
          const uint64_t c = now[static_cast<size_t>(prev)][s] + (cur ? p.cost[i] : 0);
          if (c < next[static_cast<size_t>(cur)][slot]) {
            next[static_cast<size_t>(cur)][slot] = c;
            from[i][static_cast<size_t>(cur)][slot] = From{static_cast<int32_t>(s), static_cast<int8_t>(prev)};
            any = true;
          }
        }
      }
    }
    now = std::move(next);
  }
  if (!any) return out;
  int best_cur = 0;
  size_t best_s = 0;
  uint64_t best = kNone;
  for (int cur = 0; cur < 2; ++cur) {
    for (size_t s = 0; s < width; ++s) {
      if (now[static_cast<size_t>(cur)][s] < best) {
        best = now[static_cast<size_t>(cur)][s];
        best_cur = cur;
        best_s = s;
      }
    }
  }
  out.feasible = true;
  out.cost = best;
  out.resolution = q;
  out.checkpointed.assign(n, false);
  for (size_t i = n; i-- > 0;) {
    out.checkpointed[i] = best_cur == 1;
    const From f = from[i][static_cast<size_t>(best_cur)][best_s];
    best_cur = f.prev;
    best_s = static_cast<size_t>(f.s);
  }
  return out;
}

namespace {

// The chain problem for `units` from the step without checkpointing.
ChainProblem chain_problem(const TrainingStep& base, const std::vector<ChainUnit>& units, uint64_t budget) {
  const size_t n = units.size();
  std::vector<int> unit_of(base.op_names.size(), -1);
  for (size_t u = 0; u < n; ++u) {
    for (int k = units[u].first_op; k <= units[u].last_op; ++k) unit_of[static_cast<size_t>(k)] = static_cast<int>(u);
  }
  ChainProblem p;
  p.cost.resize(n);
  for (size_t u = 0; u < n; ++u) p.cost[u] = units[u].flops;
  p.saving.assign(n, {0, 0, 0, 0});
  for (const Allocation& a : base.allocations) {
    if (a.op_index < 0 || a.bytes == 0) continue;
    const int producer = unit_of[static_cast<size_t>(a.op_index)];
    int lo = producer, hi = producer;
    bool outside_keeper = false;
    auto widen = [&](int u) {
      if (u < 0) return;
      lo = lo < 0 ? u : std::min(lo, u);
      hi = std::max(hi, u);
    };
    for (int o : a.kept_by) {
      const int u = unit_of[static_cast<size_t>(o)];
      if (u < 0) outside_keeper = true;
      widen(u);
    }
    for (int o : a.read_by) widen(unit_of[static_cast<size_t>(o)]);
    if (hi < 0) continue;
    const bool kept_base = !a.kept_by.empty();
    // Whether it stays until backward when units hi-1 and hi choose (prev,
    // cur); units further back are taken as not checkpointed (no saving
    // is claimed that depends on them).
    for (int prev = 0; prev < 2; ++prev) {
      for (int cur = 0; cur < 2; ++cur) {
        auto checkpointed = [&](int u) { return (u == hi && cur) || (u == hi - 1 && prev && hi - 1 >= lo); };
        bool kept = outside_keeper;
        for (int o : a.kept_by) {
          const int u = unit_of[static_cast<size_t>(o)];
          kept = kept || (u >= 0 && !checkpointed(u));
        }
        for (int o : a.read_by) {
          const int u = unit_of[static_cast<size_t>(o)];
          kept = kept || (u >= 0 && u != producer && checkpointed(u));
        }
        const int64_t bytes = static_cast<int64_t>(a.bytes);
        p.saving[static_cast<size_t>(hi)][static_cast<size_t>(prev * 2 + cur)] +=
            (kept_base ? bytes : 0) - (kept ? bytes : 0);
      }
    }
  }
  // What must be saved while units 0..i are stored: the most live then,
  // less the budget.
  p.need.assign(n, std::numeric_limits<int64_t>::min());
  p.need_before = std::numeric_limits<int64_t>::min();
  for (const auto& point : base.timeline) {
    const int k = base.op_at_time[static_cast<size_t>(point.time)];
    int stored = 0;
    if (k >= 0) {
      for (const auto& u : units) stored += u.last_op < k ? 1 : 0;
    }
    const int64_t need = static_cast<int64_t>(point.live_bytes) - static_cast<int64_t>(budget);
    int64_t& slot = stored == 0 ? p.need_before : p.need[static_cast<size_t>(stored - 1)];
    slot = std::max(slot, need);
  }
  for (auto& need : p.need) need = std::max<int64_t>(need, std::numeric_limits<int64_t>::min() / 4);
  return p;
}

}  // namespace

CheckpointPlan plan_checkpointing(const Model& model, const TrainOptions& options, uint64_t budget) {
  TrainOptions plain = options;
  plain.checkpoint.clear();
  CheckpointPlan best;
  best.step = predict_training_step(model, plain);
  best.peak_bytes = best.step.peak_bytes;
  if (best.step.peak_bytes <= budget) {
    best.fits = best.optimal = true;
    return best;
  }
  const TrainingStep base = best.step;
  bool found = false;
  for (int depth = 1; depth <= 4; ++depth) {
    const std::vector<ChainUnit> units = chain_units(base, depth);
    if (units.empty()) continue;
    // The chain model can be off by what it does not see; tighten the
    // budget by the simulated excess and solve again, a few times.
    uint64_t target = budget;
    for (int attempt = 0; attempt < 6; ++attempt) {
      const ChainProblem cp = chain_problem(base, units, target);
      const ChainSolution s = solve_chain(cp);
      if (!s.feasible) break;
      TrainOptions with = options;
      with.checkpoint.clear();
      for (size_t u = 0; u < units.size(); ++u) {
        if (s.checkpointed[u]) with.checkpoint.push_back(units[u].module);
      }
      TrainingStep step = predict_training_step(model, with);
      if (step.peak_bytes <= budget) {
        if (!found || step.recompute_flops < best.recompute_flops) {
          best.fits = true;
          best.modules = with.checkpoint;
          best.depth = depth;
          best.peak_bytes = step.peak_bytes;
          best.recompute_flops = step.recompute_flops;
          best.optimal = attempt == 0;
          best.resolution = s.resolution;
          best.step = std::move(step);
          found = true;
        }
        break;
      }
      const uint64_t excess = step.peak_bytes - budget;
      if (excess >= target) break;
      target -= excess;
    }
  }
  if (!found) {
    // Nothing fits: report checkpointing every unit of the depth that
    // comes closest.
    for (int depth = 1; depth <= 4; ++depth) {
      const std::vector<ChainUnit> units = chain_units(base, depth);
      if (units.empty()) continue;
      TrainOptions with = options;
      with.checkpoint.clear();
      for (const auto& u : units) with.checkpoint.push_back(u.module);
      TrainingStep step = predict_training_step(model, with);
      if (step.peak_bytes < best.peak_bytes) {
        best.modules = with.checkpoint;
        best.depth = depth;
        best.peak_bytes = step.peak_bytes;
        best.recompute_flops = step.recompute_flops;
        best.step = std::move(step);
      }
    }
  }
  best.recompute_fraction = base.forward_flops > 0
                                ? static_cast<double>(best.recompute_flops) / static_cast<double>(base.forward_flops)
                                : 0.0;
  return best;
}

}  // namespace gpumem::train
