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
    path[k] = module_path(step.op_names[k], depth);
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
  // One front per last choice: entries (savings, cost, parent) where no
  // entry is both cheaper-or-equal and saving-more-or-equal than another.
  struct Entry {
    int64_t saving;
    uint64_t cost;
    int parent;  // index into the previous layer's entries, -1 at the start
    bool checkpointed;
  };
  ChainSolution out;
  if (p.need_before > 0) return out;
  const size_t n = p.cost.size();
  std::vector<std::vector<Entry>> layers(n);  // all kept entries per unit, both choices
  std::vector<Entry> previous = {{0, 0, -1, false}};
  for (size_t i = 0; i < n; ++i) {
    std::vector<Entry> next[2];
    for (size_t e = 0; e < previous.size(); ++e) {
      const Entry& from = previous[e];
      const int prev = i == 0 ? 0 : static_cast<int>(from.checkpointed);
      for (int cur = 0; cur < 2; ++cur) {
        const int64_t saving = from.saving + p.saving[i][static_cast<size_t>(prev * 2 + cur)];
        if (saving < p.need[i]) continue;
        next[cur].push_back({saving, from.cost + (cur ? p.cost[i] : 0), static_cast<int>(e), cur == 1});
      }
    }
    std::vector<Entry> kept;
    for (auto& front : next) {
      std::sort(front.begin(), front.end(), [](const Entry& a, const Entry& b) {
        return a.cost != b.cost ? a.cost < b.cost : a.saving > b.saving;
      });
      int64_t best = std::numeric_limits<int64_t>::min();
      for (const Entry& e : front) {
        if (e.saving <= best) continue;  // a cheaper entry saves as much
        best = e.saving;
        kept.push_back(e);
      }
    }
    if (kept.empty()) return out;
    layers[i] = kept;
    previous = std::move(kept);
  }
  if (n == 0) {
    out.feasible = true;
    return out;
  }
  size_t best = 0;
  for (size_t e = 1; e < layers[n - 1].size(); ++e) {
    if (layers[n - 1][e].cost < layers[n - 1][best].cost) best = e;
  }
  out.feasible = true;
  out.cost = layers[n - 1][best].cost;
  out.checkpointed.assign(n, false);
  int at = static_cast<int>(best);
  for (size_t i = n; i-- > 0;) {
    const Entry& e = layers[i][static_cast<size_t>(at)];
    out.checkpointed[i] = e.checkpointed;
    at = e.parent;
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
      const ChainSolution s = solve_chain(chain_problem(base, units, target));
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
