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
  // A module the parent calls more than once (torchvision's shared relu)
  // is exported as "relu", "relu_1", "relu_2": the later names are no
  // module of the model (get_submodule fails), and wrapping the first would
  // checkpoint every call. Neither is a unit.
  const auto called_again = [&](const std::string& module) {
    if (span.count(module + "_1")) return true;
    const size_t underscore = module.rfind('_');
    if (underscore == std::string::npos || underscore + 1 == module.size() || module.rfind('.') > underscore)
      return false;
    const std::string suffix = module.substr(underscore + 1);
    return std::all_of(suffix.begin(), suffix.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
           span.count(module.substr(0, underscore)) > 0;
  };
  std::vector<ChainUnit> units;
  for (const auto& [module, range] : span) {
    if (called_again(module)) continue;
    bool contiguous = true;
    uint64_t flops = 0;
    for (int k = range.first; k <= range.second && contiguous; ++k) {
      contiguous = path[static_cast<size_t>(k)].empty() || path[static_cast<size_t>(k)] == module;
      flops += step.op_flops[static_cast<size_t>(k)];
    }
    if (contiguous && flops > 0) {
      const std::string parent =
          depth > 1 ? module_path(step.op_names[static_cast<size_t>(range.first)], depth - 1) : "";
      units.push_back({module, parent, range.first, range.second, flops});
    }
  }
  std::sort(units.begin(), units.end(), [](const auto& a, const auto& b) { return a.first_op < b.first_op; });
  return units;
}

ChainSolution solve_chain(const ChainProblem& p) {
  // Savings are counted in steps of q bytes, each term rounded down (so a
  // plan found never saves less than the model says), over the range the
  // constraints can tell apart: from the smallest need to the largest need
  // plus every saving that could still be lost later. q = 1 (exact) while
  // that range has at most kSteps values. kSteps is 2^10 per position, so
  // that what rounding loses over the whole chain stays near a 2^10th of
  // the range, within 2^23 back-pointers of 8 bytes.
  ChainSolution out;
  const size_t n = p.cost.size();
  if (p.need.empty() || p.need[0] > 0) return out;
  const auto L = static_cast<size_t>(std::clamp(p.max_segment, 1, 255));  // From::units holds it
  const auto positions = static_cast<int64_t>(n + 1);
  const int64_t kSteps = std::clamp<int64_t>(std::min((int64_t{1} << 10) * positions, (int64_t{1} << 22) / positions),
                                             int64_t{1} << 12, int64_t{1} << 20);
  if (n == 0) {
    out.feasible = true;
    return out;
  }
  auto joins = [&](size_t i) { return i < p.joins_previous.size() && p.joins_previous[i]; };
  int64_t lo = 0, hi = 0, losses = 0;
  for (size_t i = 0; i < n; ++i) {
    for (int64_t v : p.normal[i]) losses += std::max<int64_t>(0, -v);
    for (size_t j = 0; j < std::min(L, p.in_segment[i].size()); ++j)
      for (int64_t v : p.in_segment[i][j]) losses += std::max<int64_t>(0, -v);
  }
  auto widen = [&](int64_t need) {
    if (need <= kNoNeed) return;
    lo = std::min(lo, need);
    hi = std::max(hi, need);
  };
  for (int64_t v : p.need) widen(v);
  for (int64_t v : p.need_backward) widen(v);
  lo -= losses;
  hi += losses;
  const int64_t q = std::max<int64_t>(1, (hi - lo + kSteps - 1) / kSteps);
  out.resolution = q;
  auto floor_div = [](int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); };
  auto ceil_div = [&](int64_t a, int64_t b) { return -floor_div(-a, b); };
  // top: the largest need rounded up, so that clamping never fails one.
  const int64_t base = floor_div(lo, q), top = floor_div(hi, q) + 1;
  const auto width = static_cast<size_t>(top - base + 1);
  auto need_of = [&](int64_t need) { return need <= kNoNeed ? base : ceil_div(need, q); };
  constexpr uint64_t kNone = std::numeric_limits<uint64_t>::max();
  // best(i)[c][s]: the least recompute with units 0..i-1 decided, savings
  // step s, and unit i-1 checkpointed (c = 1) or not, kept for the L + 1
  // positions a transition spans; from[i][c][s]: the state it came from
  // and how many units the transition decided.
  struct From {
    int32_t s = -1;
    uint8_t units = 0;  // how many units the transition decided
    int8_t prev = 0;
  };
  std::vector<std::array<std::vector<uint64_t>, 2>> ring(L + 1);
  for (auto& b : ring) b = {std::vector<uint64_t>(width, kNone), std::vector<uint64_t>(width, kNone)};
  auto best = [&](size_t at) -> std::array<std::vector<uint64_t>, 2>& { return ring[at % (L + 1)]; };
  std::vector<std::array<std::vector<From>, 2>> from(n + 1);
  for (size_t i = 1; i <= n; ++i) from[i] = {std::vector<From>(width), std::vector<From>(width)};
  best(0)[0][static_cast<size_t>(-base)] = 0;
  auto offer = [&](size_t at, int c, int64_t t, uint64_t cost, From f) {
    if (t < need_of(p.need[at])) return;
    const auto slot = static_cast<size_t>(std::clamp(t, base, top) - base);
    if (cost < best(at)[static_cast<size_t>(c)][slot]) {
      best(at)[static_cast<size_t>(c)][slot] = cost;
      from[at][static_cast<size_t>(c)][slot] = f;
    }
  };
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && i + L <= n) {
      for (auto& row : best(i + L)) std::fill(row.begin(), row.end(), kNone);  // position i - 1's, done
    }
    const int64_t need_back = need_of(p.need_backward[i]);
    for (int prev = 0; prev < 2; ++prev) {
      const auto& now = best(i)[static_cast<size_t>(prev)];
      for (size_t slot = 0; slot < width; ++slot) {
        if (now[slot] == kNone) continue;
        const int64_t s = static_cast<int64_t>(slot) + base;
        From f{static_cast<int32_t>(slot), 1, static_cast<int8_t>(prev)};
        // Unit i runs normally.
        if (s >= need_back) offer(i + 1, 0, s + floor_div(p.normal[i][static_cast<size_t>(prev)], q), now[slot], f);
        // A segment i..e: every unit's backward sees only the savings from
        // before it; forward inside it sees the run's savings so far.
        int64_t t = s;
        uint64_t cost = now[slot];
        for (size_t e = i; e < n && e - i < L && (e == i || joins(e)); ++e) {
          if (s < need_of(p.need_backward[e])) break;
          if (e - i >= p.in_segment[e].size()) break;
          t += floor_div(p.in_segment[e][e - i][static_cast<size_t>(prev)], q);
          cost += p.cost[e];
          f.units = static_cast<uint8_t>(e - i + 1);
          offer(e + 1, 1, t, cost, f);
          if (e + 1 < n && t < need_of(p.need[e + 1])) break;  // the run cannot go on past a failed moment
        }
      }
    }
  }
  int best_c = 0;
  size_t best_s = 0;
  uint64_t least = kNone;
  for (int c = 0; c < 2; ++c) {
    for (size_t slot = 0; slot < width; ++slot) {
      if (best(n)[static_cast<size_t>(c)][slot] < least) {
        least = best(n)[static_cast<size_t>(c)][slot];
        best_c = c;
        best_s = slot;
      }
    }
  }
  if (least == kNone) return out;
  out.feasible = true;
  out.cost = least;
  out.resolution = q;
  out.checkpointed.assign(n, false);
  out.starts_segment.assign(n, false);
  for (size_t at = n; at > 0;) {
    const From f = from[at][static_cast<size_t>(best_c)][best_s];
    const size_t start = at - f.units;
    if (best_c == 1) {
      for (size_t u = start; u < at; ++u) out.checkpointed[u] = true;
      out.starts_segment[start] = true;
    }
    at = start;
    best_c = f.prev;
    best_s = static_cast<size_t>(f.s);
  }
  return out;
}

namespace {

// Which units an allocation of the step without checkpointing concerns.
struct Concern {
  int producer = -1;            // the unit that makes it (-1: none)
  int last = -1;                // the last unit that makes, reads or keeps it
  bool outside_keeper = false;  // an op of no unit keeps it for backward
  bool kept_base = false;       // kept for backward without checkpointing
  std::vector<int> keepers, readers;
  int64_t bytes = 0;
};

// Whether it is kept until backward when `segment(u)` gives each unit's
// checkpointed segment (-1: runs normally): a unit that runs normally keeps
// what its ops keep; a checkpointed segment keeps its inputs, what it reads
// from outside itself.
template <typename SegmentOf>
bool kept(const Concern& a, SegmentOf segment) {
  if (a.outside_keeper) return true;
  for (int u : a.keepers) {
    if (segment(u) < 0) return true;
  }
  for (int u : a.readers) {
    if (u == a.producer) continue;
    const int seg = segment(u);
    if (seg >= 0 && (a.producer < 0 || segment(a.producer) != seg)) return true;
  }
  return false;
}

// The chain problem for `units` from the step without checkpointing, at a
// budget of 0: each need is the live bytes (within() applies a budget).
// Units before the one deciding (and before its segment's predecessor) are
// taken as running normally: no saving is claimed that depends on them.
ChainProblem chain_problem(const TrainingStep& base, const std::vector<ChainUnit>& units, int max_segment) {
  const size_t n = units.size();
  std::vector<int> unit_of(base.op_names.size(), -1);
  for (size_t u = 0; u < n; ++u) {
    for (int k = units[u].first_op; k <= units[u].last_op; ++k) unit_of[static_cast<size_t>(k)] = static_cast<int>(u);
  }
  ChainProblem p;
  p.max_segment = max_segment;
  p.cost.resize(n);
  p.joins_previous.assign(n, false);
  for (size_t u = 0; u < n; ++u) {
    p.cost[u] = units[u].flops;
    p.joins_previous[u] = u > 0 && max_segment > 1 && wrappable_after(units[u - 1], units[u]);
  }
  p.normal.assign(n, {0, 0});
  p.in_segment.assign(n, {});
  for (size_t u = 0; u < n; ++u) {
    size_t run = 1;
    while (run < static_cast<size_t>(max_segment) && run <= u && p.joins_previous[u + 1 - run]) ++run;
    p.in_segment[u].assign(run, {0, 0});
  }
  for (const Allocation& alloc : base.allocations) {
    if (alloc.op_index < 0 || alloc.bytes == 0) continue;
    Concern a;
    a.producer = unit_of[static_cast<size_t>(alloc.op_index)];
    a.last = a.producer;
    a.bytes = static_cast<int64_t>(alloc.bytes);
    a.kept_base = !alloc.kept_by.empty();
    for (int o : alloc.kept_by) {
      const int u = unit_of[static_cast<size_t>(o)];
      if (u < 0) {
        a.outside_keeper = true;
      } else {
        a.keepers.push_back(u);
        a.last = std::max(a.last, u);
      }
    }
    for (int o : alloc.read_by) {
      const int u = unit_of[static_cast<size_t>(o)];
      if (u < 0) continue;
      a.readers.push_back(u);
      a.last = std::max(a.last, u);
    }
    if (a.last < 0) continue;
    const auto last = static_cast<size_t>(a.last);
    const int64_t before = a.kept_base ? a.bytes : 0;
    for (int prev = 0; prev < 2; ++prev) {
      // Unit `last` runs normally; the one before is its own segment or not.
      p.normal[last][static_cast<size_t>(prev)] +=
          before - (kept(a, [&](int u) { return u == a.last - 1 && prev ? 1 : -1; }) ? a.bytes : 0);
      // Unit `last` is the j-th of a segment starting at last - j.
      for (size_t j = 0; j < p.in_segment[last].size(); ++j) {
        const int start = a.last - static_cast<int>(j);
        const auto segment = [&](int u) { return u >= start && u <= a.last ? 0 : (u == start - 1 && prev ? 1 : -1); };
        p.in_segment[last][j][static_cast<size_t>(prev)] += before - (kept(a, segment) ? a.bytes : 0);
      }
    }
  }
  // What must be saved at each moment: the most live then. Backward
  // through an op between two units counts as the later unit's backward
  // (it runs after it, and inside its segment if a run spans it).
  p.need.assign(n + 1, kNoNeed);
  p.need_backward.assign(n, kNoNeed);
  std::vector<int> last_ops;  // increasing: the units are in order
  for (const auto& u : units) last_ops.push_back(u.last_op);
  for (const auto& point : base.timeline) {
    const int k = base.op_at_time[static_cast<size_t>(point.time)];
    const auto need = static_cast<int64_t>(point.live_bytes);
    // Units whose forward is done before op k.
    const auto stored =
        k >= 0 ? static_cast<size_t>(std::lower_bound(last_ops.begin(), last_ops.end(), k) - last_ops.begin()) : 0;
    if (k >= 0 && point.phase == Phase::kBackward && stored < n) {
      int64_t& slot = p.need_backward[stored];
      slot = std::max(slot, need);
    } else {
      int64_t& slot = p.need[k >= 0 ? stored : 0];
      slot = std::max(slot, need);
    }
  }
  return p;
}

// `live` (a problem at a budget of 0) within `budget`.
ChainProblem within(ChainProblem live, uint64_t budget) {
  // A budget past 2^60 bytes is no limit; capping it keeps need - budget
  // from overflowing (a budget over INT64_MAX read as negative: UBSan).
  const int64_t b = static_cast<int64_t>(std::min<uint64_t>(budget, uint64_t{1} << 60));
  const auto shift = [b](int64_t& need) {
    if (need > kNoNeed) need = std::max(need - b, kNoNeed + 1);
  };
  std::for_each(live.need.begin(), live.need.end(), shift);
  std::for_each(live.need_backward.begin(), live.need_backward.end(), shift);
  return live;
}

// The longest run of modules one checkpoint is offered to wrap.
constexpr size_t kMaxSegment = 16;

// `train --checkpoint` entries for a solution: "layer1" or "layer1.0..layer1.1".
std::vector<std::string> segments_of(const std::vector<ChainUnit>& units, const ChainSolution& s) {
  std::vector<std::string> out;
  for (size_t u = 0; u < units.size(); ++u) {
    if (!s.checkpointed[u]) continue;
    if (s.starts_segment[u]) {
      out.push_back(units[u].module);
    } else {
      const std::string first = out.back().substr(0, out.back().find(".."));
      out.back() = first + ".." + units[u].module;
    }
  }
  return out;
}

// The units of one depth of the module tree, and their problems at a budget
// of 0: with single modules, then with runs of siblings too (the runs'
// model is the rougher, a run being recomputed at once, so both are solved
// and the simulation picks). Built once: the budget only shifts the needs.
struct Chain {
  int depth = 0;
  std::vector<ChainUnit> units;
  std::vector<ChainProblem> problems;
};

std::vector<Chain> chains_of(const TrainingStep& base) {
  std::vector<Chain> chains;
  for (int depth = 1; depth <= 4; ++depth) {
    Chain c{depth, chain_units(base, depth), {}};
    if (c.units.empty()) continue;
    c.problems.push_back(chain_problem(base, c.units, 1));
    if (c.units.size() > 1)
      c.problems.push_back(chain_problem(base, c.units, static_cast<int>(std::min(c.units.size(), kMaxSegment))));
    chains.push_back(std::move(c));
  }
  return chains;
}

// The cheapest plan the chain programs find within `budget`; `closest`
// keeps the lowest simulated peak seen when none fits. fits is false when
// none does.
CheckpointPlan plan_within(const Model& model, const TrainOptions& options, const std::vector<Chain>& chains,
                           uint64_t budget, CheckpointPlan& closest) {
  CheckpointPlan best;
  for (const Chain& chain : chains) {
    for (const ChainProblem& live : chain.problems) {
      // The chain model can be off by what it does not see; tighten the
      // budget by the simulated excess and solve again, a few times.
      uint64_t target = budget;
      for (int attempt = 0; attempt < 6; ++attempt) {
        const ChainSolution s = solve_chain(within(live, target));
        if (!s.feasible) break;
        TrainOptions with = options;
        with.checkpoint = segments_of(chain.units, s);
        TrainingStep step = predict_training_step(model, with);
        const uint64_t peak = step.peak_bytes;
        CheckpointPlan plan;
        plan.modules = with.checkpoint;
        plan.depth = chain.depth;
        plan.peak_bytes = peak;
        plan.recompute_flops = step.recompute_flops;
        plan.optimal = attempt == 0;
        plan.resolution = s.resolution;
        plan.step = std::move(step);
        if (peak <= budget) {
          if (!best.fits || plan.recompute_flops < best.recompute_flops) {
            best = std::move(plan);
            best.fits = true;
          }
          break;
        }
        if (peak < closest.peak_bytes) closest = std::move(plan);
        const uint64_t excess = peak - budget;
        if (excess >= target) break;
        target -= excess;
      }
    }
  }
  return best;
}

}  // namespace

bool wrappable_after(const ChainUnit& previous, const ChainUnit& next) {
  return next.parent == previous.parent && next.first_op == previous.last_op + 1;
}

bool has_runs(const std::vector<std::string>& checkpoint) {
  return std::any_of(checkpoint.begin(), checkpoint.end(),
                     [](const std::string& m) { return m.find("..") != std::string::npos; });
}

CheckpointPlan plan_checkpointing(const Model& model, const TrainOptions& options, uint64_t budget) {
  TrainOptions plain = options;
  plain.checkpoint.clear();
  CheckpointPlan closest;
  closest.step = predict_training_step(model, plain);
  closest.peak_bytes = closest.step.peak_bytes;
  const TrainingStep base = closest.step;
  auto finish = [&](CheckpointPlan plan) {
    plan.recompute_fraction = base.forward_flops > 0
                                  ? static_cast<double>(plan.recompute_flops) / static_cast<double>(base.forward_flops)
                                  : 0.0;
    return plan;
  };
  if (base.peak_bytes <= budget) {
    closest.fits = closest.optimal = true;
    return finish(std::move(closest));
  }
  const std::vector<Chain> chains = chains_of(base);
  CheckpointPlan best = plan_within(model, options, chains, budget, closest);
  if (best.fits) return finish(std::move(best));
  // Nothing fits: the lowest peak a plan reaches, found by bisecting the
  // budget between this one and the step without checkpointing (to a 64th
  // of the gap), and checkpointing every unit of each depth.
  uint64_t lo = budget, hi = base.peak_bytes;
  for (int round = 0; round < 6 && hi - lo > (base.peak_bytes - budget) / 64; ++round) {
    const uint64_t mid = lo + (hi - lo) / 2;
    CheckpointPlan plan = plan_within(model, options, chains, mid, closest);
    if (plan.fits) {
      hi = plan.peak_bytes;
      if (plan.peak_bytes < closest.peak_bytes) closest = std::move(plan);
    } else {
      lo = mid;
    }
  }
  for (const Chain& chain : chains) {
    TrainOptions with = options;
    with.checkpoint.clear();
    for (const auto& u : chain.units) with.checkpoint.push_back(u.module);
    TrainingStep step = predict_training_step(model, with);
    if (step.peak_bytes < closest.peak_bytes) {
      closest.modules = with.checkpoint;
      closest.depth = chain.depth;
      closest.peak_bytes = step.peak_bytes;
      closest.recompute_flops = step.recompute_flops;
      closest.optimal = false;
      closest.step = std::move(step);
    }
  }
  closest.fits = false;
  closest.optimal = false;
  return finish(std::move(closest));
}

}  // namespace gpumem::train
