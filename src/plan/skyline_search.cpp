// Skyline search.
//
// Every plan can be turned, without growing, into a gravity-stable one: each
// buffer as low as it goes, resting on the ground or on a buffer under it.
// Such a plan can be built bottom-up: take the lowest point of the skyline
// (the floor of a section: a time span in which the same buffers live), the
// leftmost if several, at height h. Either some buffer has its bottom exactly
// there (it starts in this section, and its whole lifetime sits on floors of
// height h), or that point stays empty. So each node branches on which
// buffer covers the lowest-leftmost point, or on leaving it empty ("closing"
// the section at h: whatever covers it later rests on something elsewhere and
// sits higher). Placement heights never decrease, so every later buffer sits
// at or above h: in each section the unplaced buffers, which all live there
// at once, must stack between max(floor, h) and the capacity. That bound, and
// its refinement with each buffer's lowest reachable offset, prune the tree;
// in a section with no slack it leaves no choice but to fill the floor.
#include "plan/skyline_search.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <numeric>
#include <unordered_map>

#include "plan/conflicts.h"

namespace gpumem::plan::detail {

bool SkylineSearch::applicable(const Problem& problem, const std::vector<int>& members, int64_t granularity) {
  for (int i : members) {
    const auto& b = problem.buffers[static_cast<size_t>(i)];
    if (b.fixed_offset || !b.gaps.empty()) return false;
    if (b.alignment > 1 && granularity % b.alignment != 0) return false;
  }
  return true;
}

namespace {

// SplitMix64: a fixed, portable hash for seeded tie-breaking.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Each half of a key mixes the whole input its own way, so that two inputs
// that agree in one half are no likelier to agree in the other.
StateKey key_of(uint64_t kind, uint64_t x, uint64_t y) {
  return {mix(mix(x * 0x100000001b3ull ^ kind) ^ y * 0x9e3779b97f4a7c15ull),
          mix(mix(x + 0x243f6a8885a308d3ull + kind) + mix(y ^ 0x13198a2e03707344ull))};
}
StateKey floor_key(uint64_t section, int64_t floor) { return key_of(1, section, static_cast<uint64_t>(floor)); }
StateKey closed_key(uint64_t section) { return key_of(2, section, 0); }
StateKey placed_key(int buffer) { return key_of(3, static_cast<uint64_t>(buffer), 0); }

}  // namespace

SkylineSearch::SkylineSearch(const Problem& problem, const std::vector<int>& members, RankOrder order, Focus focus,
                             uint64_t seed, bool mirror, Preference preference, bool tiling)
    : focus_(focus), seed_(seed), preference_(preference), tiling_(tiling) {
  const auto& b = problem.buffers;
  const Sections sections(problem, members);
  sections_ = sections.count();
  auto section_of = [&](int64_t t) { return sections.of(t); };

  std::vector<int> ranked(members);
  if (seed != 0) {
    // A seeded shuffle first: the stable sort below keeps it among equals,
    // and a few swaps of near-equals make restarts diverge.
    std::sort(ranked.begin(), ranked.end(), [&](int x, int y) {
      return mix(seed ^ static_cast<uint64_t>(x)) < mix(seed ^ static_cast<uint64_t>(y));
    });
  }
  auto life = [&](int i) { return b[static_cast<size_t>(i)].upper - b[static_cast<size_t>(i)].lower; };
  auto size = [&](int i) { return b[static_cast<size_t>(i)].size; };
  std::stable_sort(ranked.begin(), ranked.end(), [&](int x, int y) {
    switch (order) {
      case RankOrder::Area: {
        const double ax = static_cast<double>(life(x)) * static_cast<double>(size(x));
        const double ay = static_cast<double>(life(y)) * static_cast<double>(size(y));
        if (ax != ay) return ax > ay;
        return size(x) > size(y);
      }
      case RankOrder::Lifetime:
        if (life(x) != life(y)) return life(x) > life(y);
        return size(x) > size(y);
      case RankOrder::Size:
        if (size(x) != size(y)) return size(x) > size(y);
        return life(x) > life(y);
    }
    return false;
  });

  if (seed != 0) {
    for (size_t k = 1; k < ranked.size(); ++k) {
      if (mix(seed * 31 + k) % 4 == 0) std::swap(ranked[k - 1], ranked[k]);
    }
  }
  std::map<std::tuple<int64_t, int64_t, int64_t>, int> last_twin;
  granularity_ = 0;
  for (int i : ranked) {
    const auto& buf = b[static_cast<size_t>(i)];
    // Mirrored, time runs backwards: the same plans, other tie-breaks.
    const int lo = section_of(buf.lower), hi = section_of(buf.upper);
    const int count = static_cast<int>(sections_);
    Item it{i, buf.size, mirror ? count - hi : lo, mirror ? count - lo : hi, static_cast<int>(items_.size()), -1};
    const auto key = std::make_tuple(buf.lower, buf.upper, buf.size);
    if (const auto t = last_twin.find(key); t != last_twin.end()) it.twin_before = t->second;
    last_twin[key] = static_cast<int>(items_.size());
    granularity_ = std::gcd(granularity_, buf.size);
    items_.push_back(it);
  }
  if (granularity_ <= 0) granularity_ = 1;
  section_key_.resize(sections_);
  for (size_t k = 0; k < sections_; ++k) section_key_[k] = mirror ? sections_ - 1 - k : k;
  covering_.assign(sections_, {});
  starting_.assign(sections_, {});
  for (size_t k = 0; k < items_.size(); ++k) {
    starting_[static_cast<size_t>(items_[k].first_section)].push_back(static_cast<int>(k));
    for (int s = items_[k].first_section; s < items_[k].end_section; ++s) {
      covering_[static_cast<size_t>(s)].push_back(static_cast<int>(k));
    }
  }
  // Who conflicts with whom: the same sweep the heuristics use, over the
  // members, then renumbered from member positions to items.
  const ConflictGraph graph(member_problem(problem, members));
  std::unordered_map<int, size_t> position;  // problem index -> member position
  for (size_t pos = 0; pos < members.size(); ++pos) position.emplace(members[pos], pos);
  std::vector<int> item_at(members.size());
  for (size_t k = 0; k < items_.size(); ++k) item_at[position.at(items_[k].index)] = static_cast<int>(k);
  conflicts_.assign(items_.size(), {});
  for (size_t pos = 0; pos < members.size(); ++pos) {
    auto& list = conflicts_[static_cast<size_t>(item_at[pos])];
    for (int other : graph.neighbors(pos)) list.push_back(item_at[static_cast<size_t>(other)]);
  }
}

void SkylineSearch::place(int item, int64_t offset) {
  const Item& it = items_[static_cast<size_t>(item)];
  trail_.push_back({3, item, -1});
  offset_[static_cast<size_t>(item)] = offset;
  hash_ ^= placed_key(it.index);
  const int64_t top = offset + it.size;
  for (int s = it.first_section; s < it.end_section; ++s) {
    const auto su = static_cast<size_t>(s);
    trail_.push_back({0, s, floor_[su]});
    hash_ ^= floor_key(section_key_[su], floor_[su]) ^ floor_key(section_key_[su], top);
    floor_[su] = top;
    if (closed_[su]) {
      trail_.push_back({1, s, 1});
      closed_[su] = 0;
      hash_ ^= closed_key(section_key_[su]);
    }
    remaining_[su] -= it.size;
  }
  for (int c : conflicts_[static_cast<size_t>(item)]) {
    auto& fm = floor_max_[static_cast<size_t>(c)];
    if (offset_[static_cast<size_t>(c)] < 0 && fm < top) {
      trail_.push_back({2, c, fm});
      fm = top;
    }
  }
  --unplaced_;
}

void SkylineSearch::undo(size_t mark) {
  while (trail_.size() > mark) {
    const Change c = trail_.back();
    trail_.pop_back();
    switch (c.kind) {
      case 0: floor_[static_cast<size_t>(c.who)] = c.old; break;
      case 1: closed_[static_cast<size_t>(c.who)] = static_cast<char>(c.old); break;
      case 2: floor_max_[static_cast<size_t>(c.who)] = c.old; break;
      case 3: {
        const Item& it = items_[static_cast<size_t>(c.who)];
        offset_[static_cast<size_t>(c.who)] = -1;
        for (int s = it.first_section; s < it.end_section; ++s) remaining_[static_cast<size_t>(s)] += it.size;
        ++unplaced_;
        break;
      }
      default: break;
    }
  }
}

bool SkylineSearch::release_bound() {
  // Items by release, highest first; each section accumulates the sizes of
  // those released at or above the current one. Those released at the level
  // h itself are left out: with them, each section would hold everything it
  // has left above h, which dfs() has checked before calling this. Sorting
  // and walking only what rests above the level halves a node's time on
  // perfect packings, where most buffers wait at the level.
  const int64_t h = level_;
  by_release_.clear();
  for (size_t k = 0; k < items_.size(); ++k) {
    if (offset_[k] < 0 && floor_max_[k] > h) by_release_.emplace_back(floor_max_[k], static_cast<int>(k));
  }
  std::sort(by_release_.begin(), by_release_.end(), std::greater<>());
  std::fill(stacked_.begin(), stacked_.end(), 0);
  for (const auto& [release, k] : by_release_) {
    const Item& it = items_[static_cast<size_t>(k)];
    const int64_t room = capacity_ - release;
    for (int s = it.first_section; s < it.end_section; ++s) {
      auto& above = stacked_[static_cast<size_t>(s)];
      above += it.size;
      if (above > room) return false;
    }
  }
  return true;
}

bool SkylineSearch::rests_at_level(int k) const {
  const Item& it = items_[static_cast<size_t>(k)];
  return offset_[static_cast<size_t>(k)] < 0 && floor_max_[static_cast<size_t>(k)] == level_ &&
         empty_before_[static_cast<size_t>(it.end_section)] == empty_before_[static_cast<size_t>(it.first_section)];
}

bool SkylineSearch::floor_tileable(int64_t h) {
  // A floor point at h without slack cannot stay empty, and only a buffer
  // placed at h can cover it: one whose whole lifetime lies in the run of
  // sections around the point where a buffer can sit at h. Buffers at one height cannot
  // overlap in time, so in each run the points without slack must be
  // covered by lifetimes laid end to end: a path through the run that
  // steps one section over a point with slack or one lifetime at a time.
  // (Perfect packings have no slack anywhere: a run's floor is then tiled
  // exactly, and one wrong buffer below makes it impossible long before the
  // search would find out.)
  // A run: sections where a buffer can sit at h, open at h or left empty
  // lower down (a buffer at h passes over that empty point).
  auto in_run = [&](size_t s) { return remaining_[s] != 0 && floor_[s] <= h && !(closed_[s] && floor_[s] == h); };
  auto must_cover = [&](size_t s) { return !may_stay_empty(s, h); };
  for (size_t a = 0; a < sections_;) {
    if (!in_run(a)) {
      ++a;
      continue;
    }
    size_t b = a;
    bool any_tight = false;
    while (b < sections_ && in_run(b)) any_tight |= must_cover(b++);
    if (!any_tight) {
      std::fill(tiles_from_.begin() + static_cast<std::ptrdiff_t>(a),
                tiles_from_.begin() + static_cast<std::ptrdiff_t>(b) + 1, 1);
      std::fill(tiles_to_.begin() + static_cast<std::ptrdiff_t>(a),
                tiles_to_.begin() + static_cast<std::ptrdiff_t>(b) + 1, 1);
      a = b;
      continue;
    }
    tiles_to_[b] = 1;
    for (size_t s = b; s-- > a;) {
      char ok = !must_cover(s) && tiles_to_[s + 1];
      for (int k : starting_[s]) {
        if (ok) break;
        if (rests_at_level(k)) ok = tiles_to_[static_cast<size_t>(items_[static_cast<size_t>(k)].end_section)];
      }
      tiles_to_[s] = ok;
    }
    if (!tiles_to_[a]) return false;
    std::fill(tiles_from_.begin() + static_cast<std::ptrdiff_t>(a),
              tiles_from_.begin() + static_cast<std::ptrdiff_t>(b) + 1, 0);
    tiles_from_[a] = 1;
    for (size_t s = a; s < b; ++s) {
      if (!tiles_from_[s]) continue;
      if (!must_cover(s)) tiles_from_[s + 1] = 1;
      for (int k : starting_[s])
        if (rests_at_level(k)) tiles_from_[static_cast<size_t>(items_[static_cast<size_t>(k)].end_section)] = 1;
    }
    a = b;
  }
  return true;
}

SearchStatus SkylineSearch::dfs() {
  ++budget_->nodes;
  if (budget_->exhausted()) return SearchStatus::Limit;
  if (unplaced_ == 0) return SearchStatus::Found;
  if (failed_ && failed_->contains(hash_)) return SearchStatus::Infeasible;

  // The lowest open level h: the lowest floor among sections where buffers
  // remain and whose floor point is not left empty.
  int64_t h = -1;
  for (size_t s = 0; s < sections_; ++s) {
    if (remaining_[s] == 0 || closed_[s]) continue;
    if (h < 0 || floor_[s] < h) h = floor_[s];
  }
  if (h < 0) return SearchStatus::Infeasible;  // buffers remain but nothing can rest anywhere
  level_ = h;

  // Bounds: everything still to place sits at or above h, above the floors,
  // strictly above a closed floor, and stacks within its sections.
  // A run of closed sections: what covers them later rests on something
  // outside the run, so it sits no lower than the nearer open floor beside
  // the run (a side that is the end of time, or a finished section, offers
  // no support).
  constexpr int64_t kNoSupport = INT64_MAX / 4;
  for (size_t s = 0; s < sections_;) {
    if (remaining_[s] == 0) {
      ++s;
      continue;
    }
    if (!closed_[s]) {
      if (std::max(floor_[s], h) + remaining_[s] > capacity_) return SearchStatus::Infeasible;
      ++s;
      continue;
    }
    size_t end = s;
    while (end < sections_ && remaining_[end] != 0 && closed_[end]) ++end;
    const int64_t left = s > 0 && remaining_[s - 1] != 0 ? floor_[s - 1] : kNoSupport;
    const int64_t right = end < sections_ && remaining_[end] != 0 ? floor_[end] : kNoSupport;
    const int64_t support = std::min(left, right);
    for (size_t c = s; c < end; ++c) {
      const int64_t lo = std::max({floor_[c] + granularity_, h, support});
      if (lo + remaining_[c] > capacity_) return SearchStatus::Infeasible;
    }
    s = end;
  }
  for (size_t k = 0; k < items_.size(); ++k) {
    if (offset_[k] < 0 && std::max(floor_max_[k], h) + items_[k].size > capacity_) return SearchStatus::Infeasible;
  }
  // Release times: in each section, a buffer can start no lower than the
  // highest floor of its lifetime. Whatever must start at or above a height
  // t stacks above t: t plus those sizes must fit, for every t.
  // Closing a section changes no release nor the level: the parent's check
  // stands, so it runs only after a placement (or a rise of the level).
  if (check_releases_ && (just_placed_ || h != checked_level_) && !release_bound()) return SearchStatus::Infeasible;
  just_placed_ = false;
  checked_level_ = h;

  // Points left empty at h, counted up to each section: whether a lifetime
  // holds one is then a subtraction. Walking each candidate's lifetime here
  // took most of a node's time on long-lived buffers (perfect packings of
  // 1,500 buffers over 800 sections).
  empty_before_[0] = 0;
  for (size_t s = 0; s < sections_; ++s) {
    empty_before_[s + 1] = empty_before_[s] + (closed_[s] && floor_[s] == h ? 1 : 0);
  }

  // Any section at level h may be decided first; take the one with the
  // fewest ways to fill its floor point (fail first). None: a dead end.
  if (tiling_ && !floor_tileable(h)) return SearchStatus::Infeasible;
  // A buffer fits at h when it can rest there, its identical twin before it
  // is placed, and (tiling_) it can be part of a tiling of its run's floor.
  auto fits_here = [&](int k) {
    const Item& it = items_[static_cast<size_t>(k)];
    if (!rests_at_level(k)) return false;
    if (it.twin_before >= 0 && offset_[static_cast<size_t>(it.twin_before)] < 0) return false;
    return !tiling_ ||
           (tiles_from_[static_cast<size_t>(it.first_section)] && tiles_to_[static_cast<size_t>(it.end_section)]);
  };
  // Each section's count of buffers that fit at h, as a difference array
  // over the fitting buffers' lifetimes: one pass over the buffers, not one
  // over every buffer alive in every section at h (which took four fifths of
  // a node's time on perfect packings of 1,500 buffers).
  std::fill(fitting_.begin(), fitting_.end(), 0);
  for (size_t k = 0; k < items_.size(); ++k) {
    if (!fits_here(static_cast<int>(k))) continue;
    ++fitting_[static_cast<size_t>(items_[k].first_section)];
    --fitting_[static_cast<size_t>(items_[k].end_section)];
  }
  int lowest = -1;
  int64_t fewest = 0;
  uint64_t lowest_tie = 0;
  int fitting = 0;
  for (size_t s = 0; s < sections_; ++s) {
    fitting += fitting_[s];
    if (remaining_[s] == 0 || closed_[s] || floor_[s] != h) continue;
    const int ways = fitting + (may_stay_empty(s, h) ? 1 : 0);  // or leaving it empty
    if (ways == 0) return SearchStatus::Infeasible;
    const int64_t slack = capacity_ - h - remaining_[s];
    int64_t key = ways;
    if (focus_ == Focus::TightFirst) key = (slack > 0 ? int64_t{1} << 20 : 0) + ways;
    if (focus_ == Focus::LeastSlack) key = slack / granularity_ * 1024 + std::min(ways, 1023);
    // Ties go to the leftmost section, or, in a seeded restart, to a
    // section picked by the seed.
    const uint64_t tie = seed_ == 0 ? s : mix(seed_ ^ (s * 0x9e3779b97f4a7c15ull));
    if (lowest < 0 || key < fewest || (key == fewest && tie < lowest_tie)) {
      lowest = static_cast<int>(s);
      fewest = key;
      lowest_tie = tie;
    }
  }

  const size_t mark = trail_.size();
  // Try first the buffers that leave the skyline flattest: flush with the
  // floors beside them, filling the valley wall to wall (or by rank alone).
  auto& order = scratch_[static_cast<size_t>(depth_)];
  order.clear();
  for (int k : covering_[static_cast<size_t>(lowest)]) {
    if (!fits_here(k)) continue;
    const Item& it = items_[static_cast<size_t>(k)];
    if (preference_ == Preference::Ranked) {
      order.push_back({0, it.rank, k});
      continue;
    }
    const int64_t top = h + it.size;
    int score = 0;
    for (const int side : {it.first_section - 1, it.end_section}) {
      if (side < 0 || static_cast<size_t>(side) >= sections_ || remaining_[static_cast<size_t>(side)] == 0) {
        score += 2;  // against the end of time or a finished section
        continue;
      }
      const int64_t f = floor_[static_cast<size_t>(side)];
      if (f == top)
        score += 3;
      else if (f > h)
        score += 1;
    }
    // Drawn: ties among equally flat buffers in an order drawn anew at each
    // level, so that short dives differ in every choice, not only where the
    // ranking was perturbed (portfolio.cpp).
    const int tie =
        preference_ == Preference::Drawn
            ? static_cast<int>(mix(seed_ ^ (static_cast<uint64_t>(k) << 32) ^ static_cast<uint64_t>(h)) >> 33)
            : it.rank;
    order.push_back({-score, tie, k});
  }
  std::sort(order.begin(), order.end());
  if (!guide_.empty()) return follow_guide(static_cast<int>(lowest), h, order, mark);
  const StateKey state = hash_;
  auto failed_here = [&]() {
    hash_ = state;
    if (failed_) failed_->insert(state);
    return SearchStatus::Infeasible;
  };
  ++depth_;
  for (const auto& [neg_score, rank, k] : order) {
    place(k, h);
    just_placed_ = true;
    const SearchStatus r = dfs();
    if (r != SearchStatus::Infeasible) {
      --depth_;
      return r;
    }
    undo(mark);
    hash_ = state;
  }
  --depth_;
  // Leave the point empty, if the section's slack allows.
  if (!may_stay_empty(static_cast<size_t>(lowest), h)) return failed_here();
  trail_.push_back({1, lowest, 0});
  closed_[static_cast<size_t>(lowest)] = 1;
  hash_ ^= closed_key(section_key_[static_cast<size_t>(lowest)]);
  const int64_t level_checked = checked_level_;
  const SearchStatus r = dfs();
  checked_level_ = level_checked;
  if (r != SearchStatus::Infeasible) return r;
  undo(mark);
  return failed_here();
}

void SkylineSearch::follow(const std::vector<int64_t>& offsets, GuideStats* stats) {
  guide_.assign(items_.size(), -1);
  guide_stats_ = stats;
  // Identical buffers take their offsets lowest first in item order, so
  // that each is placed after its twin_before, as the search requires.
  std::map<int, std::vector<int64_t>> twins;  // first item of a group -> offsets
  std::vector<int> group(items_.size());
  for (size_t k = 0; k < items_.size(); ++k) {
    const int before = items_[k].twin_before;
    group[k] = before < 0 ? static_cast<int>(k) : group[static_cast<size_t>(before)];
    twins[group[k]].push_back(offsets[static_cast<size_t>(items_[k].index)]);
  }
  for (auto& [first, list] : twins) std::sort(list.begin(), list.end(), std::greater<>());
  for (size_t k = 0; k < items_.size(); ++k) {
    auto& list = twins[group[k]];
    guide_[k] = list.back();
    list.pop_back();
  }
}

SearchStatus SkylineSearch::follow_guide(int lowest, int64_t h, const std::vector<std::tuple<int, int, int>>& order,
                                         size_t mark) {
  GuideStats& st = *guide_stats_;
  int want = -1;
  for (int k : covering_[static_cast<size_t>(lowest)]) {
    if (offset_[static_cast<size_t>(k)] < 0 && guide_[static_cast<size_t>(k)] == h) want = k;
  }
  if (want >= 0) {
    const auto at = std::find_if(order.begin(), order.end(), [&](const auto& c) { return std::get<2>(c) == want; });
    if (at == order.end()) {
      st.blocked = true;
      return SearchStatus::Infeasible;
    }
    ++st.placements;
    if (at != order.begin()) {
      ++st.wrong_first_picks;
      st.wrong_first_ties += std::get<0>(*at) == std::get<0>(order.front());
    }
    place(want, h);
    just_placed_ = true;
    ++depth_;
    const SearchStatus r = dfs();
    --depth_;
    if (r == SearchStatus::Infeasible) undo(mark);
    return r;
  }
  ++st.closes;
  st.closes_where_some_fit += !order.empty();
  if (!may_stay_empty(static_cast<size_t>(lowest), h)) {
    st.blocked = true;
    return SearchStatus::Infeasible;
  }
  trail_.push_back({1, lowest, 0});
  closed_[static_cast<size_t>(lowest)] = 1;
  hash_ ^= closed_key(section_key_[static_cast<size_t>(lowest)]);
  return dfs();
}

SearchStatus SkylineSearch::find(int64_t capacity, SearchBudget& budget, std::vector<int64_t>& offsets) {
  capacity_ = capacity;
  budget_ = &budget;
  floor_.assign(sections_, 0);
  closed_.assign(sections_, 0);
  remaining_.assign(sections_, 0);
  floor_max_.assign(items_.size(), 0);
  offset_.assign(items_.size(), -1);
  trail_.clear();
  hash_ = {};
  for (size_t k = 0; k < sections_; ++k) hash_ ^= floor_key(section_key_[k], 0);
  just_placed_ = true;
  checked_level_ = -1;
  depth_ = 0;
  stacked_.assign(sections_, 0);
  by_release_.reserve(items_.size());
  empty_before_.assign(sections_ + 1, 0);
  tiles_from_.assign(sections_ + 1, 0);
  tiles_to_.assign(sections_ + 1, 0);
  fitting_.assign(sections_ + 1, 0);
  scratch_.assign(items_.size() * 2 + sections_ + 2, {});
  unplaced_ = static_cast<int>(items_.size());
  for (const Item& it : items_) {
    for (int s = it.first_section; s < it.end_section; ++s) remaining_[static_cast<size_t>(s)] += it.size;
  }
  const SearchStatus status = dfs();
  if (status == SearchStatus::Found) {
    for (size_t k = 0; k < items_.size(); ++k) offsets[static_cast<size_t>(items_[k].index)] = offset_[k];
  }
  return status;
}

std::vector<int64_t> pushed_down(const Problem& problem, const std::vector<int64_t>& offsets) {
  std::vector<size_t> by_offset(offsets.size());
  std::iota(by_offset.begin(), by_offset.end(), size_t{0});
  std::sort(by_offset.begin(), by_offset.end(), [&](size_t a, size_t b) { return offsets[a] < offsets[b]; });
  std::vector<int64_t> low(offsets.size(), 0);
  std::vector<size_t> placed;
  for (size_t i : by_offset) {
    const Buffer& b = problem.buffers[i];
    int64_t at = 0;
    for (size_t j : placed) {
      const Buffer& o = problem.buffers[j];
      if (b.overlaps_in_time(o)) at = std::max(at, low[j] + o.size);
    }
    low[i] = at;
    placed.push_back(i);
  }
  return low;
}

}  // namespace gpumem::plan::detail
