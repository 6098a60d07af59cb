#include "gpumem/plan/problem.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "gpumem/common/error.h"

namespace gpumem::plan {

bool Problem::has_gaps() const {
  return std::any_of(buffers.begin(), buffers.end(), [](const Buffer& b) { return !b.gaps.empty(); });
}

std::optional<std::string> gap_error(const Buffer& b) {
  int64_t previous_end = b.lower;
  for (size_t k = 0; k < b.gaps.size(); ++k) {
    const Gap& g = b.gaps[k];
    if (g.upper <= g.lower) return fmt::format("gap {}-{} is empty", g.lower, g.upper);
    if (g.lower < b.lower || g.upper > b.upper) {
      return fmt::format("gap {}-{} is not inside the lifetime [{},{})", g.lower, g.upper, b.lower, b.upper);
    }
    if (k > 0 && g.lower < previous_end) {
      return fmt::format("gap {}-{} overlaps or precedes the gap before it (gaps must be in time order)", g.lower,
                         g.upper);
    }
    previous_end = g.upper;
    if (g.window && (g.window->lower < 0 || g.window->lower > g.window->upper || g.window->upper > b.size)) {
      return fmt::format("gap {}-{}: window {}:{} is not within the buffer's {} bytes", g.lower, g.upper,
                         g.window->lower, g.window->upper, b.size);
    }
  }
  return std::nullopt;
}

void check_gaps(const Problem& problem) {
  for (const Buffer& b : problem.buffers) {
    if (auto why = gap_error(b)) throw InputError(fmt::format("buffer '{}': {}", printable(b.id), *why));
  }
}

std::vector<Occupancy> occupancy(const Buffer& b) {
  std::vector<Occupancy> out;
  if (b.size <= 0 || b.upper <= b.lower) return out;
  int64_t t = b.lower;
  for (const Gap& g : b.gaps) {
    if (g.lower > t) out.push_back({t, g.lower, 0, b.size});
    if (g.window && g.window->upper > g.window->lower) out.push_back({g.lower, g.upper, g.window->lower, g.window->upper});
    t = g.upper;
  }
  if (t < b.upper) out.push_back({t, b.upper, 0, b.size});
  return out;
}

int64_t lower_bound(const Problem& problem) {
  // One event per end and per start of what each buffer occupies. Lifetimes
  // are half-open, so at equal times the ends come first: [0,3) and [3,9)
  // are never live together. Buffers that occupy nothing (size <= 0, or an
  // empty lifetime upper <= lower, which only a problem built in code can
  // have) are left out.
  struct Event {
    int64_t time;
    int64_t delta;
  };
  std::vector<Event> events;
  events.reserve(problem.buffers.size() * 2);
  for (const Buffer& b : problem.buffers) {
    if (b.gaps.empty()) {
      if (b.size <= 0 || b.upper <= b.lower) continue;
      events.push_back(Event{b.lower, b.size});
      events.push_back(Event{b.upper, -b.size});
      continue;
    }
    for (const Occupancy& o : occupancy(b)) {
      events.push_back(Event{o.lower, o.end - o.begin});
      events.push_back(Event{o.upper, o.begin - o.end});
    }
  }
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return a.time != b.time ? a.time < b.time : a.delta < b.delta;
  });
  int64_t live = 0;
  int64_t peak = 0;
  for (const Event& e : events) {
    // Only the sum of buffers live together is ever formed, so this overflows
    // only when that sum does (parse_csv's limits rule it out).
    if (__builtin_add_overflow(live, e.delta, &live)) {
      throw InputError(fmt::format("the buffers live at time {} add up to more than 2^63 - 1 bytes", e.time));
    }
    peak = std::max(peak, live);
  }
  return peak;
}

int64_t arena_size(const Problem& problem, const std::vector<int64_t>& offsets) {
  if (offsets.size() != problem.buffers.size()) {
    throw std::invalid_argument(fmt::format("arena_size: {} offsets for {} buffers", offsets.size(),
                                            problem.buffers.size()));
  }
  int64_t arena = 0;
  for (size_t i = 0; i < offsets.size(); ++i) {
    const Buffer& b = problem.buffers[i];
    int64_t end = 0;
    if (__builtin_add_overflow(offsets[i], b.size, &end)) {
      throw InputError(fmt::format("buffer '{}': offset {} + size {} is past 2^63 - 1 bytes", printable(b.id),
                                   offsets[i], b.size));
    }
    arena = std::max(arena, end);
  }
  return arena;
}

}  // namespace gpumem::plan
