// solve(): heuristics first, then the exact search per time partition while
// a gap to the best proven bound remains and time allows.
#include <algorithm>
#include <chrono>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/plan/solver.h"
#include "gpumem/plan/validate.h"
#include "plan/conflicts.h"
#include "plan/disjunctive_search.h"
#include "plan/exact_search.h"
#include "plan/heuristic.h"
#include "plan/portfolio.h"
#include "plan/skyline_search.h"

namespace gpumem::plan {
namespace {

using Clock = std::chrono::steady_clock;

// The exact searches keep per-pair conflict lists and recurse once per
// placement: beyond this many buffers in one time partition, the heuristic
// plan is kept and the gap reported.
constexpr size_t kMaxExactBuffers = 2000;

// Every arena of a canonical plan is a multiple of this: targets and proven
// bounds move in steps of it. (Canonical offsets are sums and differences of
// sizes, window bounds, alignments and pinned offsets.)
int64_t granularity(const Problem& problem) {
  int64_t g = 0;
  for (const auto& b : problem.buffers) {
    g = std::gcd(g, b.size);
    if (b.alignment > 1) g = std::gcd(g, b.alignment);
    if (b.fixed_offset) g = std::gcd(g, *b.fixed_offset);
    for (const Gap& gap : b.gaps) {
      if (gap.window) g = std::gcd(std::gcd(g, gap.window->lower), gap.window->upper);
    }
  }
  return g > 0 ? g : 1;
}

bool has_gaps(const Problem& problem, const std::vector<int>& members) {
  return std::any_of(members.begin(), members.end(),
                     [&](int i) { return !problem.buffers[static_cast<size_t>(i)].gaps.empty(); });
}

int64_t round_up(int64_t v, int64_t g) { return (v + g - 1) / g * g; }

void check_fixed(const Problem& problem) {
  Problem pinned;
  std::vector<int64_t> offsets;
  std::vector<int> index;
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    const auto& b = problem.buffers[i];
    if (!b.fixed_offset) continue;
    pinned.buffers.push_back(b);
    offsets.push_back(*b.fixed_offset);
  }
  if (auto v = validate(pinned, offsets)) throw InputError("fixed offsets: " + v->message);
}

struct Partition {
  std::vector<int> members;
  int64_t arena = 0;   // of the best plan known for it
  int64_t proven = 0;  // nothing smaller exists
};

int64_t partition_arena(const Problem& p, const std::vector<int>& members, const std::vector<int64_t>& offsets) {
  int64_t a = 0;
  for (int i : members) a = std::max(a, offsets[static_cast<size_t>(i)] + p.buffers[static_cast<size_t>(i)].size);
  return a;
}

int64_t partition_lower_bound(const Problem& p, const std::vector<int>& members) {
  return lower_bound(detail::member_problem(p, members));
}

}  // namespace

const char* to_string(StopReason reason) {
  switch (reason) {
    case StopReason::Optimal: return "optimal";
    case StopReason::Fits: return "fits";
    case StopReason::NoFit: return "no_fit";
    case StopReason::HeuristicOnly: return "heuristic_only";
    case StopReason::TimeLimit: return "time_limit";
    case StopReason::NodeLimit: return "node_limit";
    case StopReason::TooLarge: return "too_large";
    case StopReason::TooManyPairs: return "too_many_pairs";
  }
  return "unknown";
}

SolveResult solve(const Problem& problem, const SolveOptions& options) {
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(std::max(options.time_limit_seconds, 0.0)));
  check_gaps(problem);
  check_fixed(problem);
  // `exact` never settles for a plan that merely fits.
  const bool minimize = options.minimize || options.solver == SolverKind::Exact;
  const size_t max_exact_buffers = options.solver == SolverKind::Exact ? SIZE_MAX : kMaxExactBuffers;

  SolveResult result;
  result.lower_bound = lower_bound(problem);
  const int64_t g = granularity(problem);
  auto heuristic = detail::best_heuristic(problem);
  result.plan = std::move(heuristic.plan);
  result.solver = "heuristic:" + heuristic.order;
  result.proven_bound = result.lower_bound;
  // A buffer of no lifetime collides with nothing: offset 0 (unless pinned)
  // is best, and the arena is at least its size.
  bool moved = false;
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    const Buffer& b = problem.buffers[i];
    if (b.fixed_offset || (b.upper > b.lower && b.size > 0)) continue;
    moved = moved || result.plan.offsets[i] != 0;
    result.plan.offsets[i] = 0;
    if (b.upper <= b.lower) result.proven_bound = std::max(result.proven_bound, b.size);
  }
  if (moved) result.plan.arena = arena_size(problem, result.plan.offsets);

  const auto finish = [&](StopReason otherwise) {
    // A bound above a plan that exists is a bug in a search or a bound, never
    // something to paper over: it would make other claims of optimality
    // suspect.
    if (result.proven_bound > result.plan.arena) {
      throw std::logic_error(fmt::format("the planner proved no plan below {} bytes, but found one of {} (a bug: please report it)",
                                         result.proven_bound, result.plan.arena));
    }
    result.optimal = result.plan.arena == result.proven_bound;
    result.stopped = result.optimal ? StopReason::Optimal : otherwise;
    result.limit_reached = result.stopped == StopReason::TimeLimit || result.stopped == StopReason::NodeLimit ||
                           result.stopped == StopReason::TooLarge || result.stopped == StopReason::TooManyPairs;
    result.gap_bytes = result.plan.arena - result.proven_bound;
    result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return result;
  };

  result.partitions = static_cast<int>(detail::time_partitions(problem).size());
  const bool fits = options.capacity && result.plan.arena <= *options.capacity;
  if (options.solver == SolverKind::Heuristic) return finish(StopReason::HeuristicOnly);
  if (result.plan.arena <= result.proven_bound) return finish(StopReason::Optimal);
  if (fits && !minimize) return finish(StopReason::Fits);
  if (options.capacity && result.proven_bound > *options.capacity && !minimize) {
    return finish(StopReason::NoFit);  // below the lower bound: nothing to search
  }
  if (options.time_limit_seconds <= 0) return finish(StopReason::TimeLimit);  // no time to search at all
  // Past this many conflicting pairs no exact search can hold the conflicts.
  if (detail::conflicting_pairs(problem) > detail::kMaxConflictPairs) return finish(StopReason::TooManyPairs);

  // Exact search, partition by partition: the arena is the largest of theirs.
  std::vector<Partition> parts;
  for (auto& members : detail::time_partitions(problem)) {
    // Buffers of no size or no lifetime never collide: they keep their
    // heuristic offsets and stay out of the searches, which could not place
    // them (they cover no section) and would take that for infeasibility.
    std::erase_if(members, [&](int i) {
      const Buffer& b = problem.buffers[static_cast<size_t>(i)];
      return b.size <= 0 || b.upper <= b.lower;
    });
    if (members.empty()) continue;
    Partition part;
    part.arena = partition_arena(problem, members, result.plan.offsets);
    part.proven = round_up(partition_lower_bound(problem, members), g);
    part.members = std::move(members);
    parts.push_back(std::move(part));
  }
  // Per partition: the skyline portfolio where it applies; else the general
  // search (alignment the sizes do not guarantee, or pinned buffers); and
  // where buffers have gaps, the disjunctive search, the one that reads them.
  std::vector<std::optional<detail::ExactSearch>> general(parts.size());
  std::vector<std::optional<detail::DisjunctiveSearch>> disjunctive(parts.size());
  for (size_t p = 0; p < parts.size(); ++p) {
    if (parts[p].members.size() > max_exact_buffers) continue;
    if (has_gaps(problem, parts[p].members)) {
      disjunctive[p].emplace(problem, parts[p].members);
    } else if (!detail::SkylineSearch::applicable(problem, parts[p].members, g)) {
      general[p].emplace(problem, parts[p].members);
    }
  }

  // The share of the sections, over the partitions the skyline portfolio
  // would search at `target`, that are full at it: a plan there leaves them
  // no slack. Each choice in such a section is forced or wrong, and a wrong
  // one shows soon, so short dives find a plan at the target, or nothing
  // does (portfolio.cpp dives where half are full). Above a perfect
  // packing's height every section has slack and the search no such guide:
  // #7 of bench/perfect_packings.cpp has no plan found at 1.15 times its
  // height in 200,000 nodes, where one dive in twenty at its height finds one.
  auto full_share_at = [&](int64_t target) {
    detail::FullSections all;
    for (size_t p = 0; p < parts.size(); ++p) {
      if (parts[p].arena <= target || parts[p].members.size() > max_exact_buffers || general[p] || disjunctive[p]) {
        continue;
      }
      const detail::FullSections one = detail::full_sections(problem, parts[p].members, target);
      all.full += one.full;
      all.alive += one.alive;
    }
    return all.share();
  };

  detail::SearchBudget budget;
  budget.deadline = deadline;
  budget.node_limit = options.node_limit;
  std::vector<int64_t> offsets = result.plan.offsets;
  bool improved = false;
  bool too_large = false;  // a partition the exact search does not take stopped it

  // Every partition must reach `target`; returns false when one cannot (and
  // then raises the proven bound) or the budget ran out.
  auto reach = [&](int64_t target, Clock::time_point until) -> detail::SearchStatus {
    const auto saved = budget.deadline;
    budget.deadline = std::min(until, deadline);
    detail::SearchStatus overall = detail::SearchStatus::Found;
    for (size_t p = 0; p < parts.size(); ++p) {
      if (parts[p].arena <= target) continue;
      if (parts[p].proven > target) {
        overall = detail::SearchStatus::Infeasible;
        break;
      }
      if (parts[p].members.size() > max_exact_buffers) {
        too_large = true;
        overall = detail::SearchStatus::Limit;  // too large to search: the heuristic plan stands
        break;
      }
      detail::SearchStatus status;
      if (options.node_limit != 0 && budget.nodes >= options.node_limit) {
        status = detail::SearchStatus::Limit;  // the node budget is spent (0 below would mean "no limit")
      } else if (disjunctive[p]) {
        status = disjunctive[p]->find(target, budget, offsets);
      } else if (general[p]) {
        status = general[p]->find(target, budget, offsets);
      } else {
        detail::PortfolioOptions portfolio;
        portfolio.deadline = budget.deadline;
        portfolio.threads = options.threads;
        if (options.node_limit != 0) portfolio.node_limit = options.node_limit - budget.nodes;
        status = detail::portfolio_find(problem, parts[p].members, target, portfolio, offsets, budget.nodes);
      }
      if (status == detail::SearchStatus::Found) {
        parts[p].arena = partition_arena(problem, parts[p].members, offsets);
        if (parts[p].arena > target) {
          throw std::logic_error(fmt::format("a search claimed a plan within {} bytes but found one of {} (a bug: please "
                                             "report it)", target, parts[p].arena));
        }
        improved = true;
      } else {
        // Arenas of canonical plans are multiples of g: none fits `target`,
        // so none is below the next multiple of g above it.
        if (status == detail::SearchStatus::Infeasible) {
          parts[p].proven = std::max(parts[p].proven, round_up(target + 1, g));
        }
        overall = status;
        break;
      }
    }
    budget.deadline = saved;
    return overall;
  };
  auto global_arena = [&]() {
    int64_t a = 0;
    for (const auto& p : parts) a = std::max(a, p.arena);
    return a;
  };
  auto global_proven = [&]() {
    int64_t b = 0;
    for (const auto& p : parts) b = std::max(b, p.proven);
    return b;
  };

  bool no_fit = false;  // the decision problem: proven that nothing fits the capacity
  if (options.capacity && !minimize) {
    // The decision problem: any plan within the capacity will do.
    no_fit = reach(*options.capacity, deadline) == detail::SearchStatus::Infeasible;
  } else {
    // Minimise. A capacity comes first: fitting it is what the caller needs
    // (a proof that nothing fits shows in the proven bound).
    // Then most real instances pack at their lower bound: try that with a
    // tenth of the time left (more where its sections are full, below),
    // then close in from above. Those that do pack there are found within
    // thousands of nodes (MiniMalloc's suite: under 0.1 s; perfect packings
    // of 2,000 buffers: under 1.5 s); the rest of the time goes to closing
    // in, which is what D needs (in 30 s: 993,280 bytes with a tenth,
    // 995,328 with a third).
    if (options.capacity && global_arena() > *options.capacity) reach(*options.capacity, deadline);
    // Where the sections are full at the bound, the first try gets more of
    // the time (full_share_at() says why): a tenth where few are (D: 5% of its
    // sections, J: 1%), half where all are (perfect packings). Not more:
    // the hardest perfect packings of bench/perfect_packings.cpp are found
    // in 1 to 10 s where they are found (#7, #4, #6), and where none is,
    // closing in needs the other half to improve on the heuristic's plan
    // (#6: 1.34 times the bound after 3 s, 1.17 to 1.22 after 15).
    const int64_t bound = global_proven();
    const double full = full_share_at(bound);
    const double first_share = 0.1 + 0.4 * full * full;
    const auto first_try =
        Clock::now() + std::chrono::duration_cast<Clock::duration>((deadline - Clock::now()) * first_share);
    auto status = reach(bound, first_try);
    // Closing in: first a target halfway down the gap, with a quarter of
    // the time left; a plan found there, or a proof that none exists, halves
    // the gap at once. When that runs out of time, the next stride is half
    // as long. Then one granule down with the rest of the time. Steps of one
    // granule alone crawl on instances far above their bound: J in 30 s ends
    // 1,007,616 bytes (was 1,021,952), D 993,280 (was 993,280-994,304).
    int64_t stride_divisor = 2;
    while (status != detail::SearchStatus::Limit || Clock::now() < deadline) {
      const int64_t arena = global_arena();
      const int64_t proven = global_proven();
      if (arena <= proven) break;
      const int64_t stride = (arena - proven) / stride_divisor / g * g;
      if (stride > g) {
        const auto slice = Clock::now() + (deadline - Clock::now()) / 4;
        const auto halfway = reach(arena - stride, slice);
        if (halfway != detail::SearchStatus::Limit) continue;  // found, or proven impossible: the gap shrank
        stride_divisor *= 2;
      }
      status = reach(arena - g, deadline);
      if (status != detail::SearchStatus::Found) break;  // a limit, or arena - g is impossible: arena is optimal
    }
  }

  if (improved) {
    result.plan.offsets = offsets;
    result.plan.arena = arena_size(problem, offsets);
    result.solver = "exact";
  }
  result.proven_bound = std::max(result.proven_bound, global_proven());
  result.nodes = budget.nodes;
  // Why the search ended without proving the plan optimal.
  StopReason why = StopReason::TimeLimit;
  if (options.capacity && result.plan.arena <= *options.capacity && !minimize) {
    why = StopReason::Fits;
  } else if (no_fit) {
    why = StopReason::NoFit;
  } else if (too_large) {
    why = StopReason::TooLarge;
  } else if (options.node_limit != 0 && budget.nodes >= options.node_limit && Clock::now() < deadline) {
    why = StopReason::NodeLimit;
  }
  return finish(why);
}

}  // namespace gpumem::plan
