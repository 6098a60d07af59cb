#pragma once
// The exact search for problems without alignment constraints or pinned
// buffers (every real graph, every MiniMalloc benchmark): a skyline search
// that branches on what covers the lowest, leftmost free point.
#include <cstdint>
#include <atomic>
#include <tuple>
#include <vector>

#include "gpumem/plan/problem.h"
#include "plan/exact_search.h"

namespace gpumem::plan::detail {

// Skyline states known to have no completion within the capacity, shared by
// the searches of one portfolio (and their threads): a lossy hash table of
// 64-bit state hashes. A state is the set of placed buffers and each
// section's floor and closed flag; whatever order led to it, its future is
// the same, so a failure found once need not be found again.
class FailedStates {
 public:
  explicit FailedStates(int log2_slots = 21) : slots_(size_t{1} << log2_slots), mask_((size_t{1} << log2_slots) - 1) {}
  // Two different states could share a hash: with 64 bits and at most a
  // few million states a search, the chance is about 2^-20 and accepted.
  // 0 marks an empty slot, so hashes have their low bit set.
  bool contains(uint64_t h) const {
    h |= 1;
    return slots_[h & mask_].load(std::memory_order_relaxed) == h ||
           slots_[(h >> 32) & mask_].load(std::memory_order_relaxed) == h;
  }
  void insert(uint64_t h) {
    h |= 1;
    auto& first = slots_[h & mask_];
    (first.load(std::memory_order_relaxed) == 0 ? first : slots_[(h >> 32) & mask_]).store(h, std::memory_order_relaxed);
  }

 private:
  std::vector<std::atomic<uint64_t>> slots_;
  size_t mask_;
};

// How ties among candidates are broken: which buffer is tried first.
enum class RankOrder { Area, Lifetime, Size };

// Which buffer is tried first at the chosen point.
enum class Preference {
  Flattest,  // the one leaving the skyline flattest (flush with its neighbours), then by rank
  Ranked,    // by rank alone
};

// Which section at the lowest level is decided first.
enum class Focus {
  FewestWays,  // the fewest buffers (or leaving it empty) that can fill its floor
  TightFirst,  // sections without slack first, then fewest ways
  LeastSlack,  // the least slack, then fewest ways
};

class SkylineSearch {
 public:
  // Usable when no member is pinned and every alignment divides `granularity`
  // (then every canonical offset is aligned on its own).
  static bool applicable(const Problem& problem, const std::vector<int>& members, int64_t granularity);

  // `seed` perturbs the order among buffers the rank leaves equal, so that
  // restarts explore different trees; seed 0 keeps the plain order.
  // `mirror` runs time backwards (the same plans, found in another order).
  SkylineSearch(const Problem& problem, const std::vector<int>& members, RankOrder order, Focus focus,
                uint64_t seed = 0, bool mirror = false, Preference preference = Preference::Flattest);

  // Shares failures with other searches of the same members and capacity.
  void share_failures(FailedStates* failed) { failed_ = failed; }

  SearchStatus find(int64_t capacity, SearchBudget& budget, std::vector<int64_t>& offsets);

 private:
  struct Item {
    int index;
    int64_t size;
    int first_section, end_section;
    int rank;
    int twin_before;  // an identical item that must be placed first, or -1
  };

  SearchStatus dfs();
  bool release_bound();
  void place(int item, int64_t offset);
  void undo(size_t mark);

  Focus focus_;
  uint64_t seed_;
  Preference preference_;
  FailedStates* failed_ = nullptr;
  std::vector<uint64_t> section_key_;  // per section: the same key whichever way time runs
  uint64_t hash_ = 0;                  // of the current state
  bool just_placed_ = true;            // the node was entered by a placement
  int64_t checked_level_ = -1;         // the level the last release check ran at
  std::vector<Item> items_;
  std::vector<std::vector<int>> covering_;   // section -> items alive there, by rank
  std::vector<std::vector<int>> conflicts_;  // item -> items alive at the same time
  size_t sections_ = 0;
  int64_t granularity_ = 1;

  int64_t capacity_ = 0;
  SearchBudget* budget_ = nullptr;
  std::vector<int64_t> floor_;      // per section
  std::vector<char> closed_;        // per section: its floor point is left empty
  std::vector<int64_t> remaining_;  // per section
  std::vector<int64_t> floor_max_;  // per item
  std::vector<int64_t> offset_;     // per item, -1 while unplaced
  // Undo log: kind 0 floor[s], 1 closed[s], 2 floor_max[item], 3 placed item.
  struct Change {
    int kind;
    int who;
    int64_t old;
  };
  std::vector<Change> trail_;
  std::vector<std::vector<std::tuple<int, int, int>>> scratch_;  // per depth: candidates by (-score, rank, item)
  int depth_ = 0;
  int64_t level_ = 0;  // the current lowest open floor
  std::vector<std::pair<int64_t, int>> by_release_;  // scratch: (release, item)
  std::vector<int64_t> stacked_;                     // scratch, per section
  int unplaced_ = 0;
};

}  // namespace gpumem::plan::detail
