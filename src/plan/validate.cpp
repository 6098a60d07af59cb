#include "gpumem/plan/validate.h"

#include <algorithm>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "gpumem/common/error.h"

namespace gpumem::plan {
namespace {

// A buffer takes bytes only with a positive size and a non-empty lifetime.
// (parse_csv guarantees both; a problem built in code may not.)
bool occupies(const Buffer& b) { return b.size > 0 && b.lower < b.upper; }

// One past the buffer's last byte. The offset is non-negative (checked
// before any overlap test) and the size positive, so in unsigned arithmetic
// the sum cannot wrap, whatever the values.
uint64_t end_of(int64_t offset, const Buffer& b) {
  return static_cast<uint64_t>(offset) + static_cast<uint64_t>(b.size);
}

std::string describe(const Buffer& b, int64_t offset) {
  return fmt::format("'{}' [{},{}) at [{},{})", printable(b.id), b.lower, b.upper, offset, end_of(offset, b));
}

Violation single(Violation::Kind kind, size_t i, std::string message) {
  return Violation{kind, static_cast<int>(i), -1, std::move(message)};
}

// Offsets non-negative, aligned and fixed offsets kept: the first buffer, in
// problem order, that breaks one of them.
std::optional<Violation> check_each(const Problem& problem, const std::vector<int64_t>& offsets) {
  for (size_t i = 0; i < offsets.size(); ++i) {
    const Buffer& b = problem.buffers[i];
    const int64_t offset = offsets[i];
    if (offset < 0) {
      return single(Violation::Kind::Negative, i,
                    fmt::format("buffer '{}' has a negative offset {}", printable(b.id), offset));
    }
    // An alignment below 1 (only possible in a problem built in code) asks for nothing.
    if (b.alignment > 1 && offset % b.alignment != 0) {
      return single(Violation::Kind::Misaligned, i,
                    fmt::format("buffer '{}' is misaligned: offset {} is not a multiple of its alignment {}",
                                printable(b.id), offset, b.alignment));
    }
    if (b.fixed_offset && *b.fixed_offset != offset) {
      return single(Violation::Kind::FixedMoved, i,
                    fmt::format("buffer '{}' is fixed at offset {} but placed at {}", printable(b.id),
                                *b.fixed_offset, offset));
    }
  }
  return std::nullopt;
}

// A sweep over time. The active rectangles (what each buffer occupies: its
// whole size, or a gap's window) sit in a set ordered by their first byte;
// while the plan is valid so far they are pairwise disjoint, so one that
// comes alive overlaps some active one exactly when it overlaps its
// neighbour below or above in that order. Starts are visited in time order,
// so the first collision found is the earliest one in time (ties: the lower
// index). Rectangles of one buffer never share a moment.
std::optional<Violation> check_overlaps(const Problem& problem, const std::vector<int64_t>& offsets) {
  struct Piece {
    int buffer;
    uint64_t begin, end;  // absolute bytes [begin, end)
  };
  struct Event {
    int64_t time;
    bool start;  // ends sort before starts at the same time: lifetimes are half-open
    int piece;
  };
  std::vector<Piece> pieces;
  std::vector<Event> events;
  events.reserve(problem.buffers.size() * 2);
  auto add = [&](size_t i, int64_t lower, int64_t upper, int64_t begin, int64_t end) {
    // The offset is non-negative (checked before) and begin <= end <= size,
    // so in unsigned arithmetic nothing wraps, whatever the values.
    const auto at = static_cast<uint64_t>(offsets[i]);
    pieces.push_back({static_cast<int>(i), at + static_cast<uint64_t>(begin), at + static_cast<uint64_t>(end)});
    events.push_back(Event{lower, true, static_cast<int>(pieces.size() - 1)});
    events.push_back(Event{upper, false, static_cast<int>(pieces.size() - 1)});
  };
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    const Buffer& b = problem.buffers[i];
    if (b.gaps.empty()) {
      if (occupies(b)) add(i, b.lower, b.upper, 0, b.size);
      continue;
    }
    for (const Occupancy& o : occupancy(b)) add(i, o.lower, o.upper, o.begin, o.end);
  }
  std::sort(events.begin(), events.end(), [&](const Event& a, const Event& b) {
    if (a.time != b.time) return a.time < b.time;
    if (a.start != b.start) return !a.start;
    return pieces[static_cast<size_t>(a.piece)].buffer < pieces[static_cast<size_t>(b.piece)].buffer;
  });

  std::set<std::pair<uint64_t, int>> active;  // (first byte, piece)
  const auto collide = [&](int pa, int pb, int64_t time) {
    const int a = pieces[static_cast<size_t>(pa)].buffer, b = pieces[static_cast<size_t>(pb)].buffer;
    const size_t ia = static_cast<size_t>(std::min(a, b));
    const size_t ib = static_cast<size_t>(std::max(a, b));
    std::string message = fmt::format("buffers {} and {} overlap", describe(problem.buffers[ia], offsets[ia]),
                                      describe(problem.buffers[ib], offsets[ib]));
    if (!problem.buffers[ia].gaps.empty() || !problem.buffers[ib].gaps.empty()) {
      message += fmt::format(" at time {}, outside their gaps", time);
    }
    return Violation{Violation::Kind::Overlap, static_cast<int>(ia), static_cast<int>(ib), std::move(message)};
  };
  for (const Event& e : events) {
    const Piece& p = pieces[static_cast<size_t>(e.piece)];
    const std::pair<uint64_t, int> key{p.begin, e.piece};
    if (!e.start) {
      active.erase(key);
      continue;
    }
    if (p.end == p.begin) continue;  // an empty window holds nothing
    const auto [it, inserted] = active.insert(key);
    (void)inserted;  // pieces are unique
    if (it != active.begin()) {
      const auto below = std::prev(it);
      if (pieces[static_cast<size_t>(below->second)].end > p.begin) return collide(below->second, e.piece, e.time);
    }
    if (const auto above = std::next(it); above != active.end()) {
      if (above->first < p.end) return collide(above->second, e.piece, e.time);
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<Violation> validate(const Problem& problem, const std::vector<int64_t>& offsets) {
  if (offsets.size() != problem.buffers.size()) {
    return Violation{Violation::Kind::WrongCount, -1, -1,
                     fmt::format("the plan has {} offsets for {} buffers", offsets.size(), problem.buffers.size())};
  }
  check_gaps(problem);
  if (auto v = check_each(problem, offsets)) return v;
  return check_overlaps(problem, offsets);
}

}  // namespace gpumem::plan
