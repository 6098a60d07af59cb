#include "plan/portfolio.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>
#include <thread>

#include <pthread.h>

#include "plan/conflicts.h"
#include "plan/skyline_search.h"

namespace gpumem::plan::detail {
namespace {

// The exact searches recurse once per placed buffer: 8 MiB, a thread's
// default stack, ran out under ASan on the bert_infer_dynamic trace. Each
// worker gets 256 MiB of address space for its stack, used only as deep as
// the search goes.
void run_with_deep_stacks(int threads, const std::function<void(int)>& work) {
  constexpr std::size_t kStack = std::size_t{256} << 20;
  struct Task {
    const std::function<void(int)>* work;
    int index;
  };
  std::vector<Task> tasks(static_cast<std::size_t>(threads));
  std::vector<pthread_t> ids(static_cast<std::size_t>(threads));
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kStack);
  std::size_t started = 0;
  for (int t = 0; t < threads; ++t) {
    tasks[static_cast<std::size_t>(t)] = {&work, t};
    const auto run = [](void* p) -> void* {
      const auto* task = static_cast<const Task*>(p);
      (*task->work)(task->index);
      return nullptr;
    };
    if (pthread_create(&ids[started], &attr, run, &tasks[static_cast<std::size_t>(t)]) != 0) {
      work(t);  // no thread to be had: this one does the work, on its own stack
      continue;
    }
    ++started;
  }
  pthread_attr_destroy(&attr);
  for (std::size_t i = 0; i < started; ++i) pthread_join(ids[i], nullptr);
}

// The Luby sequence 1,1,2,1,1,2,4,1,1,2,...: restart limits that waste at
// most a log factor against the best fixed limit, whatever it is.
uint64_t luby(uint64_t i) {
  for (uint64_t k = 1;; ++k) {
    const uint64_t full = (uint64_t{1} << k) - 1;
    if (i == full) return uint64_t{1} << (k - 1);
    if (i < full) return luby(i - ((uint64_t{1} << (k - 1)) - 1));
  }
}

// A search strategy: how buffers are ranked, which section is decided
// first, whether time runs backwards, and how candidates are preferred.
struct Strategy {
  RankOrder order;
  Focus focus;
  bool mirrored;
  Preference preference;
};

// All 36 strategies, the most useful first: these eight solve each of the
// MiniMalloc challenging instances within a few thousand nodes (measured one
// by one, 0.4 s each); the rest follow in a fixed order.
std::vector<Strategy> strategies() {
  std::vector<Strategy> list = {
      {RankOrder::Size, Focus::FewestWays, false, Preference::Ranked},
      {RankOrder::Area, Focus::LeastSlack, false, Preference::Flattest},
      {RankOrder::Size, Focus::TightFirst, false, Preference::Ranked},
      {RankOrder::Size, Focus::FewestWays, false, Preference::Flattest},
      {RankOrder::Area, Focus::FewestWays, false, Preference::Ranked},
      {RankOrder::Area, Focus::TightFirst, true, Preference::Flattest},
      {RankOrder::Size, Focus::FewestWays, true, Preference::Flattest},
      {RankOrder::Lifetime, Focus::LeastSlack, false, Preference::Ranked},
  };
  for (RankOrder order : {RankOrder::Area, RankOrder::Lifetime, RankOrder::Size}) {
    for (Focus focus : {Focus::FewestWays, Focus::TightFirst, Focus::LeastSlack}) {
      for (bool mirrored : {false, true}) {
        for (Preference preference : {Preference::Flattest, Preference::Ranked}) {
          const bool listed = std::any_of(list.begin(), list.begin() + 8, [&](const Strategy& s) {
            return s.order == order && s.focus == focus && s.mirrored == mirrored && s.preference == preference;
          });
          if (!listed) list.push_back({order, focus, mirrored, preference});
        }
      }
    }
  }
  return list;
}

constexpr uint64_t kRestartBase = 4096;  // nodes

}  // namespace

SearchStatus portfolio_find(const Problem& problem, const std::vector<int>& members, int64_t capacity,
                            const PortfolioOptions& options, std::vector<int64_t>& offsets, uint64_t& nodes) {
  int threads = options.threads;
  if (threads <= 0) threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> total_nodes{0};
  std::mutex lock;
  SearchStatus result = SearchStatus::Limit;
  // Shared by every attempt at this capacity: 2^12 slots for tiny problems,
  // up to 2^21 (32 MiB) for large ones.
  int log2_slots = 12;
  while (log2_slots < 21 && (size_t{1} << log2_slots) < members.size() * 4096) ++log2_slots;
  FailedStates failed(log2_slots);

  static const std::vector<Strategy> kStrategies = strategies();
  // Where at least half the sections are full at this capacity (no slack),
  // attempts alternate between two kinds; elsewhere all are systematic.
  // Systematic attempts run the strategies in turn, the first pass
  // unseeded, under growing node limits. Dives are short, draw each choice
  // among equally flat buffers at random (Preference::Drawn) and skip the
  // release bound (SkylineSearch::check_releases). Without slack a search
  // either finds the plan with almost no backtracking or never recovers from
  // an early choice, so many short dives beat a few long searches
  // (bench/perfect_packings.cpp: #7, every section full, is found by about
  // one dive in twenty, in under 2 nodes per buffer, and by no systematic
  // search in 200,000 nodes). With slack, dives would only take time from
  // the systematic searches, which find MiniMalloc's challenging instances
  // in a few thousand nodes; and drawn ties there lose: D after 30 s ends
  // 3,072 bytes higher when the seeded systematic passes draw theirs.
  const bool dives = full_sections(problem, members, capacity).share() >= 0.5;
  const uint64_t dive_limit = std::max<uint64_t>(kRestartBase, 2 * members.size());
  const std::vector<int64_t> start = offsets;  // workers copy this, not `offsets`, which the first to finish writes
  auto worker = [&](int id) {
    std::vector<int64_t> local = start;
    uint64_t systematic = 0;  // this worker's systematic attempts so far
    for (uint64_t round = 0;; ++round) {
      const uint64_t attempt = round * static_cast<uint64_t>(threads) + static_cast<uint64_t>(id);
      const bool dive = dives && attempt % 2 == 1;
      const uint64_t nth = dives ? attempt / 2 : attempt;  // among attempts of its kind
      // The nth of each kind runs strategy nth mod 36; each later pass of
      // the systematic ones over the list is seeded differently.
      const Strategy& st = kStrategies[nth % kStrategies.size()];
      const uint64_t seed = dive ? nth + 1 : nth / kStrategies.size();
      // Every fourth systematic attempt filters candidates by the floor's
      // tiling (the first included): it finds some perfect packings in a
      // second that are out of reach without it, and loses others. The share
      // was chosen on the ten perfect packings of bench/perfect_packings.cpp.
      const bool tiling = !dive && nth % 4 == 0;
      SkylineSearch search(problem, members, st.order, st.focus, seed, st.mirrored,
                           dive ? Preference::Drawn : st.preference, tiling);
      search.share_failures(&failed);
      search.check_releases(!dive);
      SearchBudget budget;
      budget.deadline = options.deadline;
      budget.stop = &stop;
      budget.node_limit = dive ? dive_limit : kRestartBase * luby(++systematic);
      if (options.node_limit != 0) {
        const uint64_t used = total_nodes.load();
        if (used >= options.node_limit) return;
        budget.node_limit = std::min(budget.node_limit, options.node_limit - used);
      }
      const SearchStatus status = search.find(capacity, budget, local);
      total_nodes += budget.nodes;
      if (status != SearchStatus::Limit) {
        std::lock_guard<std::mutex> guard(lock);
        if (!stop.exchange(true)) {
          result = status;
          if (status == SearchStatus::Found) {
            for (int i : members) offsets[static_cast<size_t>(i)] = local[static_cast<size_t>(i)];
          }
        }
        return;
      }
      if (stop.load() || std::chrono::steady_clock::now() >= options.deadline) return;
    }
  };

  run_with_deep_stacks(threads, worker);
  nodes += total_nodes.load();
  return result;
}

}  // namespace gpumem::plan::detail
