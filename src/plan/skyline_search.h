#pragma once
// The exact search for problems without alignment constraints or pinned
// buffers (every real graph, every MiniMalloc benchmark): a skyline search
// that branches on what covers the lowest, leftmost free point.
#include <atomic>
#include <cstdint>
#include <memory>
#include <tuple>
#include <vector>

#include "gpumem/plan/problem.h"
#include "plan/exact_search.h"

namespace gpumem::plan::detail {

// A skyline state's key: 128 bits, the XOR of one random-looking key per
// placed buffer, per (section, floor) and per closed section (Zobrist
// hashing), so that placements update it in O(1).
struct StateKey {
  uint64_t a = 0, b = 0;
  StateKey& operator^=(const StateKey& o) {
    a ^= o.a;
    b ^= o.b;
    return *this;
  }
  friend StateKey operator^(StateKey x, const StateKey& y) { return x ^= y; }
  bool operator==(const StateKey&) const = default;
};

// Skyline states known to have no completion within the capacity, shared by
// the searches of one portfolio (and their threads). A state is the set of
// placed buffers and each section's floor and closed flag; whatever order
// led to it, its future is the same, so a failure found once need not be
// found again. A hit prunes a live search, so it must be certain: each slot
// keeps the whole 128-bit key, and a lookup must match both halves. A wrong
// hit then needs two states whose keys agree in all 128 bits (about 2^-90
// for a search of a billion states), or, while another thread is halfway
// through writing a slot, two 64-bit coincidences at once.
//
// The slots are zero pages fresh from the system, in huge pages where the
// system gives them (table_memory.cpp): a short search faults in a few of
// them, instead of writing the whole table (up to 32 MiB) before its first
// node, and a long one takes a 2 MiB page per fault, not 4 KiB.
class FailedStates {
 public:
  explicit FailedStates(int log2_slots = 21)
      : slots_(static_cast<Slot*>(zeroed_table((size_t{1} << log2_slots) * sizeof(Slot))),
               Free{(size_t{1} << log2_slots) * sizeof(Slot)}),
        mask_((size_t{1} << log2_slots) - 1) {}
  bool contains(StateKey k) const {
    if (k == StateKey{}) return false;  // the empty slot's pattern is never stored
    for (const size_t at : {k.a & mask_, k.b & mask_}) {
      Slot& s = slots_.get()[at];
      if (load(s.a) == k.a && load(s.b) == k.b) return true;
    }
    return false;
  }
  // Into the first of its two slots when that is empty, else over the second.
  void insert(StateKey k) {
    if (k == StateKey{}) return;  // all zeros marks an empty slot: keep it out (a lost prune, never a wrong one)
    Slot& first = slots_.get()[k.a & mask_];
    const bool empty = load(first.a) == 0 && load(first.b) == 0;
    Slot& s = empty ? first : slots_.get()[k.b & mask_];
    std::atomic_ref<uint64_t>(s.a).store(k.a, std::memory_order_relaxed);
    std::atomic_ref<uint64_t>(s.b).store(k.b, std::memory_order_relaxed);
  }

 private:
  struct Slot {
    alignas(std::atomic_ref<uint64_t>::required_alignment) uint64_t a;
    alignas(std::atomic_ref<uint64_t>::required_alignment) uint64_t b;
  };
  struct Free {
    size_t bytes;
    void operator()(Slot* p) const { free_table(p, bytes); }
  };
  static uint64_t load(uint64_t& v) { return std::atomic_ref<uint64_t>(v).load(std::memory_order_relaxed); }
  // Zeroed memory of `bytes`, aligned for any slot; throws std::bad_alloc.
  static void* zeroed_table(size_t bytes);
  static void free_table(void* p, size_t bytes) noexcept;
  std::unique_ptr<Slot, Free> slots_;
  size_t mask_;
};

// How ties among candidates are broken: which buffer is tried first.
enum class RankOrder { Area, Lifetime, Size };

// Which buffer is tried first at the chosen point.
enum class Preference {
  Flattest,  // the one leaving the skyline flattest (flush with its neighbours), then by rank
  Ranked,    // by rank alone
  Drawn,     // the flattest, ties drawn at random from the seed, the buffer and the level
};

// Which section at the lowest level is decided first.
enum class Focus {
  FewestWays,  // the fewest buffers (or leaving it empty) that can fill its floor
  TightFirst,  // sections without slack first, then fewest ways
  LeastSlack,  // the least slack, then fewest ways
};

class SkylineSearch {
 public:
  // Usable when no member is pinned or has gaps, and every alignment divides `granularity`
  // (then every canonical offset is aligned on its own).
  static bool applicable(const Problem& problem, const std::vector<int>& members, int64_t granularity);

  // `seed` perturbs the order among buffers the rank leaves equal, so that
  // restarts explore different trees; seed 0 keeps the plain order.
  // `mirror` runs time backwards (the same plans, found in another order).
  // `tiling`: candidates are only buffers that can be part of a tiling of
  // their run's floor, and sections are ranked by those (a dead end pruned
  // either way; this changes the choices, which helps on some perfect
  // packings and hurts on others).
  SkylineSearch(const Problem& problem, const std::vector<int>& members, RankOrder order, Focus focus,
                uint64_t seed = 0, bool mirror = false, Preference preference = Preference::Flattest,
                bool tiling = false);

  // Shares failures with other searches of the same members and capacity.
  void share_failures(FailedStates* failed) { failed_ = failed; }

  // Whether nodes check the release bound (on by default). It prunes dead
  // ends early but takes most of a node's time on perfect packings (each
  // waiting buffer summed over its sections): a short dive, which succeeds
  // with almost no backtracking or not at all, runs eight times as many
  // nodes a second without it (perfect packing #7: about the same share of
  // dives succeed either way).
  void check_releases(bool on) { check_releases_ = on; }

  SearchStatus find(int64_t capacity, SearchBudget& budget, std::vector<int64_t>& offsets);

  // What a replay of a known packing found: how this search's own order
  // ranked each choice the packing makes (bench/perfect_packings.cpp,
  // `replay`). A choice the search would not offer at all means a pruning
  // rule cuts that packing: `blocked`.
  struct GuideStats {
    uint64_t placements = 0;
    uint64_t wrong_first_picks = 0;      // the packing's buffer is not the search's first pick
    uint64_t wrong_first_ties = 0;       // of those, tied with the first pick on flatness
    uint64_t closes = 0;                 // points the packing leaves empty
    uint64_t closes_where_some_fit = 0;  // of those, where the search would try buffers first
    bool blocked = false;
  };
  // From now on, every find() of this search takes at each node only the
  // choice `offsets` (per problem buffer; a gravity-stable packing within
  // the capacity) makes, and counts into `stats`; a guided search stays
  // guided, and one that fails leaves its state as it stopped (it never
  // backtracks). Identical buffers are renumbered so that the search's
  // twin order holds.
  void follow(const std::vector<int64_t>& offsets, GuideStats* stats);

 private:
  // A node of a replay (follow()): the packing's choice at the point
  // (section `lowest`, level h), counted against the search's `order`.
  SearchStatus follow_guide(int lowest, int64_t h, const std::vector<std::tuple<int, int, int>>& order, size_t mark);
  struct Item {
    int index;
    int64_t size;
    int first_section, end_section;
    int rank;
    int twin_before;  // an identical item that must be placed first, or -1
  };

  SearchStatus dfs();
  bool release_bound();
  // Whether the floor points at level h that cannot stay empty can be
  // covered by buffers resting at h, one after another in time; fills
  // tiles_from_/tiles_to_ for the candidates' check (skyline_search.cpp).
  bool floor_tileable(int64_t h);
  bool rests_at_level(int k) const;
  // Whether section s's floor point at h may stay empty: what remains there
  // still fits above it.
  bool may_stay_empty(size_t s, int64_t h) const { return h + granularity_ + remaining_[s] <= capacity_; }
  void place(int item, int64_t offset);
  void undo(size_t mark);

  Focus focus_;
  uint64_t seed_;
  Preference preference_;
  bool tiling_;
  FailedStates* failed_ = nullptr;
  bool check_releases_ = true;
  std::vector<uint64_t> section_key_;  // per section: the same key whichever way time runs
  StateKey hash_;                      // of the current state
  bool just_placed_ = true;            // the node was entered by a placement
  int64_t checked_level_ = -1;         // the level the last release check ran at
  std::vector<Item> items_;
  std::vector<std::vector<int>> covering_;   // section -> items alive there, by rank
  std::vector<std::vector<int>> starting_;   // section -> items whose lifetime begins there
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
  int64_t level_ = 0;                                // the current lowest open floor
  std::vector<std::pair<int64_t, int>> by_release_;  // scratch: (release, item)
  std::vector<int64_t> stacked_;                     // scratch, per section
  std::vector<int> empty_before_;                    // scratch, per section + 1: points left empty at h before it
  // Scratch, per section + 1, within each run of sections at the level: the
  // points that must be covered from the run's start up to this section
  // can be (tiles_from_), and those from here to the run's end (tiles_to_).
  std::vector<char> tiles_from_, tiles_to_;
  std::vector<int> fitting_;  // scratch, per section + 1: buffers that fit at the level, as differences
  int unplaced_ = 0;
  std::vector<int64_t> guide_;  // per item: the known packing's offset (follow()); empty: none
  GuideStats* guide_stats_ = nullptr;
};

// A plan with each buffer as low as it goes, lowest first: no buffer
// higher than before (whatever was under it still is), and gravity-stable,
// as the skyline search builds its plans. For follow(), on problems the
// skyline search takes: no alignment above 1, gaps or pinned offsets.
std::vector<int64_t> pushed_down(const Problem& problem, const std::vector<int64_t>& offsets);

}  // namespace gpumem::plan::detail
