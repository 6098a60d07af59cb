// Planned mode: observe one iteration, plan it, serve the next ones from one
// arena at the planned offsets (see planned_allocator.h).
#include "gpumem/alloc/planned_allocator.h"
#include "gpumem/alloc/memory_resource.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "alloc/small_slots.h"
#include "common/bounded_json.h"
#include "gpumem/common/error.h"
#include "gpumem/plan/problem.h"
#include "gpumem/plan/solver.h"

namespace gpumem::alloc {
namespace {

// Offsets are multiples of this, and sizes rounded up to it: the caching
// allocator's own rounding, so a planned block is as aligned as a cached one.
// Requests under 512 bytes take 128 (small_slots.h says why).
constexpr std::size_t kPlanAlignment = 512;
std::size_t alignment_of(std::size_t bytes) {
  return bytes <= detail::SmallSlots::kLargest ? detail::SmallSlots::kSlot : kPlanAlignment;
}

// A different shape (batch size, sequence length) shows early in an
// iteration, where its input is allocated: the first difference from the
// plan within this many requests switches plans; a later one is the same
// shape changed a little, which the plan's matching absorbs.
constexpr std::size_t kShapeWindow = 16;

std::size_t rounded(std::size_t bytes) { return round_up(bytes, alignment_of(bytes)); }

// Whether two pinned buffers share a moment and a byte.
bool meet(const plan::Buffer& x, const plan::Buffer& y) {
  return x.lower < y.upper && y.lower < x.upper && *x.fixed_offset < *y.fixed_offset + y.size &&
         *y.fixed_offset < *x.fixed_offset + x.size;
}

// Pinned small requests' stretches that meet in time and place become one,
// until none do (a handful, from an iteration's start).
void merge_meeting(std::vector<plan::Buffer>& stretches) {
  for (bool merged = true; merged;) {
    merged = false;
    for (std::size_t i = 0; i < stretches.size() && !merged; ++i) {
      for (std::size_t j = i + 1; j < stretches.size() && !merged; ++j) {
        plan::Buffer &x = stretches[i], &y = stretches[j];
        if (!meet(x, y)) continue;
        const std::int64_t x_at = *x.fixed_offset, y_at = *y.fixed_offset;
        const std::int64_t at = std::min(x_at, y_at);
        x.size = std::max(x_at + x.size, y_at + y.size) - at;
        x.fixed_offset = at;
        x.lower = std::min(x.lower, y.lower);
        x.upper = std::max(x.upper, y.upper);
        stretches.erase(stretches.begin() + static_cast<std::ptrdiff_t>(j));
        merged = true;
      }
    }
  }
}

}  // namespace

IterationPlan plan_iteration(const std::vector<std::size_t>& sizes, const std::vector<std::int64_t>& born,
                             const std::vector<std::int64_t>& died, double solve_seconds,
                             const std::vector<std::int64_t>* pinned) {
  IterationPlan out;
  out.sizes = sizes;
  out.offsets.assign(sizes.size(), -1);
  // Two passes, so that the requests of 512 bytes and more keep the
  // skyline search (which needs one alignment that divides every size):
  // they are planned first, with each pinned small request standing for
  // the 512-byte-aligned stretch it lies in; then the small ones, at 128
  // bytes, around them pinned where the first pass put them.
  plan::Problem large, all;
  std::vector<plan::Buffer> stretches;  // of pinned small requests
  std::vector<std::size_t> index;       // buffer of `all` -> request
  std::vector<int> large_of;            // buffer of `all` -> buffer of `large` (-1: small)
  bool mixed = false;                   // small requests among them
  const auto aligned = static_cast<std::int64_t>(kPlanAlignment);
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    if (died[k] < 0 || died[k] <= born[k] || sizes[k] == 0) continue;
    plan::Buffer b;
    b.id = std::to_string(k);
    b.lower = born[k];
    b.upper = died[k];
    b.size = static_cast<std::int64_t>(rounded(sizes[k]));
    b.alignment = static_cast<std::int64_t>(alignment_of(sizes[k]));
    if (pinned && (*pinned)[k] >= 0) b.fixed_offset = (*pinned)[k];
    const bool small = b.alignment < aligned;
    mixed = mixed || small;
    large_of.push_back(small ? -1 : static_cast<int>(large.buffers.size()));
    if (!small) {
      large.buffers.push_back(b);
    } else if (b.fixed_offset) {
      plan::Buffer stretch = b;
      stretch.fixed_offset = *b.fixed_offset / aligned * aligned;
      stretch.size = round_up(*b.fixed_offset + b.size, aligned) - *stretch.fixed_offset;
      stretch.alignment = aligned;
      stretches.push_back(std::move(stretch));
    }
    all.buffers.push_back(std::move(b));
    index.push_back(k);
  }
  if (all.buffers.empty()) return out;
  merge_meeting(stretches);
  // A merged stretch can meet a pinned larger request that none of its
  // parts met: then one pass over all (slower to prove, never wrong).
  bool one_pass = false;
  for (const plan::Buffer& stretch : stretches)
    for (const plan::Buffer& b : large.buffers) one_pass = one_pass || (b.fixed_offset && meet(stretch, b));
  for (plan::Buffer& stretch : stretches) large.buffers.push_back(std::move(stretch));
  plan::SolveOptions solve;
  solve.time_limit_seconds = solve_seconds;
  const auto started = std::chrono::steady_clock::now();
  plan::SolveResult result;
  if (!mixed || one_pass) {
    result = plan::solve(all, solve);
  } else {
    if (!large.buffers.empty()) {
      const plan::SolveResult first = plan::solve(large, solve);
      for (std::size_t i = 0; i < all.buffers.size(); ++i) {
        plan::Buffer& b = all.buffers[i];
        if (large_of[i] >= 0) b.fixed_offset = first.plan.offsets[static_cast<std::size_t>(large_of[i])];
      }
      // One budget for both passes: the small ones get what is left (the
      // greedy start alone, when nothing is).
      const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      solve.time_limit_seconds = std::max(0.0, solve_seconds - spent);
    }
    result = plan::solve(all, solve);
    // Optimal around the first pass's places, which bind no other plan: only
    // an arena as small as the most live at once is proven.
    result.optimal = result.plan.arena <= result.lower_bound;
  }
  for (std::size_t i = 0; i < index.size(); ++i) out.offsets[index[i]] = result.plan.offsets[i];
  out.arena = static_cast<std::size_t>(result.plan.arena);
  out.proven_optimal = result.optimal;
  return out;
}

std::string to_json(const IterationPlan& plan) {
  nlohmann::ordered_json j;
  j["format"] = "gpumem-iteration-plan";
  j["version"] = 2;  // 2: a request under 512 bytes may sit at a multiple of 128
  j["arena_bytes"] = plan.arena;
  j["proven_optimal"] = plan.proven_optimal;
  auto& requests = j["requests"] = nlohmann::ordered_json::array();
  for (std::size_t k = 0; k < plan.sizes.size(); ++k) requests.push_back({plan.sizes[k], plan.offsets[k]});
  return json_text(j) + "\n";
}

namespace {

constexpr std::size_t kMaxRequests = std::size_t{1} << 22;
constexpr std::int64_t kMaxArena = std::int64_t{1} << 50;

// Every offset -1 or an aligned range inside the arena, sizes 1 to 2^50:
// what serving a plan relies on. Compared without adding, so that no value
// a file can hold overflows.
void check_plan(const IterationPlan& plan, const std::string& name) {
  const auto fail = [&](const std::string& what) { return InputError(fmt::format("{}: {}", name, what)); };
  if (plan.sizes.size() != plan.offsets.size()) throw fail("sizes and offsets differ in number");
  if (plan.sizes.size() > kMaxRequests) throw fail(fmt::format("{} requests, more than 2^22", plan.sizes.size()));
  if (plan.arena > static_cast<std::size_t>(kMaxArena)) throw fail("the arena is over 2^50 bytes");
  const auto arena = static_cast<std::int64_t>(plan.arena);
  for (std::size_t k = 0; k < plan.sizes.size(); ++k) {
    const std::size_t size = plan.sizes[k];
    const std::int64_t offset = plan.offsets[k];
    if (size == 0 || size > static_cast<std::size_t>(kMaxArena))
      throw fail(fmt::format("request {}: size {} is not 1 to 2^50 bytes", k, size));
    if (offset != -1 && (offset < 0 || offset % static_cast<std::int64_t>(alignment_of(size)) != 0 ||
                         offset > arena - static_cast<std::int64_t>(rounded(size))))
      throw fail(fmt::format("request {}: offset {} is not -1 or a multiple of {} that fits the arena", k, offset,
                             alignment_of(size)));
  }
}

}  // namespace

IterationPlan iteration_plan_from_json(std::string_view text, const std::string& name) {
  const auto fail = [&](const std::string& what) { return InputError(fmt::format("{}: {}", name, what)); };
  const nlohmann::json j = parse_bounded_json(text, name, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) throw fail("not a JSON object");
  if (!j.contains("format") || !j["format"].is_string() || j["format"].get<std::string>() != "gpumem-iteration-plan")
    throw fail("\"format\" is not \"gpumem-iteration-plan\"");
  // Version 1's offsets (multiples of 512) are version 2's too.
  if (!j.contains("version") || !j["version"].is_number_integer() ||
      (j["version"].get<std::int64_t>() != 1 && j["version"].get<std::int64_t>() != 2))
    throw fail("\"version\" is not 1 or 2");
  if (!j.contains("arena_bytes") || !j["arena_bytes"].is_number_integer() || j["arena_bytes"].get<std::int64_t>() < 0 ||
      j["arena_bytes"].get<std::int64_t>() > kMaxArena)
    throw fail("\"arena_bytes\" is not a byte count up to 2^50");
  if (j.contains("proven_optimal") && !j["proven_optimal"].is_boolean())
    throw fail("\"proven_optimal\" is not true or false");
  if (!j.contains("requests") || !j["requests"].is_array()) throw fail("\"requests\" is not an array");
  const auto& requests = j["requests"];
  if (requests.size() > kMaxRequests) throw fail(fmt::format("{} requests, more than 2^22", requests.size()));
  IterationPlan plan;
  plan.arena = static_cast<std::size_t>(j["arena_bytes"].get<std::int64_t>());
  plan.proven_optimal = j.contains("proven_optimal") && j["proven_optimal"].get<bool>();
  for (std::size_t k = 0; k < requests.size(); ++k) {
    const auto& r = requests[k];
    if (!r.is_array() || r.size() != 2 || !r[0].is_number_integer() || !r[1].is_number_integer())
      throw fail(fmt::format("request {}: not [size, offset]", k));
    const std::int64_t size = r[0].get<std::int64_t>(), offset = r[1].get<std::int64_t>();
    if (size <= 0 || size > kMaxArena) throw fail(fmt::format("request {}: size {} is not 1 to 2^50 bytes", k, size));
    plan.sizes.push_back(static_cast<std::size_t>(size));
    plan.offsets.push_back(offset);
  }
  check_plan(plan, name);
  return plan;
}

PlannedOptions planned_options(const AllocatorConfig& config) {
  PlannedOptions options;
  options.max_shapes = config.planned_shapes;
  options.virtual_arena_bytes = config.planned_virtual_arena;
  return options;
}

PlannedAllocator::PlannedAllocator(Upstream upstream, AllocatorConfig config, PlannedOptions options)
    : upstream_(upstream), cache_(upstream, std::move(config)), options_(options) {}

PlannedAllocator::~PlannedAllocator() {
  free_arena(arena_);
  for (Arena& a : retired_) free_arena(a);
  for (const auto& [p, block] : from_device_)
    if (!block.small) upstream_.memory->deallocate(p, block.bytes, stream_.value_or(kDefaultStream));
}

void* PlannedAllocator::allocate_from_device(std::size_t bytes, StreamId stream, std::size_t entry) {
  const std::size_t size = rounded(bytes);
  if (size < bytes) throw OutOfMemoryError(fmt::format("{} bytes cannot be allocated", bytes), bytes);
  const bool small = bytes <= detail::SmallSlots::kLargest && stream == *stream_;
  if (small && !small_) small_ = std::make_unique<detail::SmallSlots>(upstream_.memory, *stream_);
  const auto take = [&] { return small ? small_->allocate(bytes) : upstream_.memory->allocate(size, stream); };
  void* p = nullptr;
  try {
    p = take();
  } catch (const OutOfMemoryError&) {
    // What the cache keeps free may be what the device lacks.
    cache_.empty_cache();
    p = take();
  }
  try {
    from_device_.emplace(p, DeviceBlock{size, small, entry, plan_id_});
  } catch (...) {
    release_device_block(p, size, small, stream);
    throw;
  }
  ++stats_.from_device;
  if (!small) stats_.device_bytes += size;  // small ones: their chunks, in planned_stats()
  return p;
}

void PlannedAllocator::release_device_block(void* p, std::size_t bytes, bool small, StreamId stream) {
  if (small)
    small_->free(p, bytes);
  else
    upstream_.memory->deallocate(p, bytes, stream);
}

std::size_t PlannedAllocator::reserved_bytes(const Arena& arena) const {
  return arena.mapped.empty() ? arena.bytes : arena.mapped.size() * upstream_.vmm->granularity();
}

void PlannedAllocator::free_arena(Arena& arena) noexcept {
  if (arena.base && !arena.mapped.empty()) {
    arena.live.clear();
    // A device error here (a kernel's, reported at the synchronization
    // before unmapping) leaves the range to the device; the arena goes.
    if (unmap_unused_granules(arena)) {
      try {
        upstream_.vmm->release(reinterpret_cast<std::uintptr_t>(arena.base), reserved_bytes(arena));
      } catch (...) {
      }
    }
  } else if (arena.base) {
    upstream_.memory->deallocate(arena.base, arena.bytes, stream_.value_or(kDefaultStream));
  }
  arena = Arena{};
}

void PlannedAllocator::retire_arena() {
  if (arena_.live.empty()) {
    free_arena(arena_);
  } else {
    retired_.push_back(std::move(arena_));
    arena_ = Arena{};
    if (!retired_.back().mapped.empty()) unmap_unused_granules(retired_.back());
  }
  stats_.arena_bytes = 0;
}

bool PlannedAllocator::map_virtual_arena(std::size_t bytes) {
  const std::size_t g = upstream_.vmm->granularity();
  const std::size_t reserved = round_up(bytes, g);
  if (reserved < bytes) return false;
  std::vector<bool> mapped(reserved / g, true);
  std::uintptr_t base = 0;
  try {
    base = upstream_.vmm->reserve(reserved);
  } catch (const OutOfMemoryError&) {
    return false;
  }
  try {
    upstream_.vmm->map(base, reserved);
  } catch (...) {
    upstream_.vmm->release(base, reserved);
    throw;
  }
  arena_.base = reinterpret_cast<char*>(base);
  arena_.bytes = bytes;
  arena_.mapped = std::move(mapped);
  return true;
}

bool PlannedAllocator::unmap_unused_granules(Arena& arena) noexcept {
  // One pass over granules and live ranges together; each run of unused
  // mapped granules is one unmap call (each waits for the device). A
  // granule counts as unmapped once the call that unmaps it returns.
  const std::size_t g = upstream_.vmm->granularity();
  const auto base = reinterpret_cast<std::uintptr_t>(arena.base);
  auto range = arena.live.begin();
  std::size_t run = 0, run_length = 0;
  const auto flush = [&] {
    if (run_length == 0) return;
    upstream_.vmm->unmap(base + run * g, run_length * g);
    std::fill_n(arena.mapped.begin() + static_cast<std::ptrdiff_t>(run), run_length, false);
    run_length = 0;
  };
  try {
    for (std::size_t i = 0; i < arena.mapped.size(); ++i) {
      const auto start = static_cast<std::int64_t>(i * g), end = static_cast<std::int64_t>((i + 1) * g);
      while (range != arena.live.end() && range->second <= start) ++range;
      const bool used = range != arena.live.end() && range->first < end;
      if (!arena.mapped[i] || used) {
        flush();
        continue;
      }
      if (run_length == 0) run = i;
      ++run_length;
    }
    flush();
  } catch (...) {
    return false;  // what is still mapped stays so
  }
  return true;
}

bool PlannedAllocator::take_arena(std::size_t bytes) {
  // The arena in force serves when it is large enough, even with blocks of
  // this iteration in it: a planned range they hold is refused as busy.
  if (arena_.bytes < bytes) {
    retire_arena();
    // What the cache served meanwhile is free again: give it to the device
    // before the arena takes its place.
    cache_.empty_cache();
    if (bytes) {
      const bool virtual_arena = upstream_.vmm && shapes_changed_ && options_.virtual_arena_bytes != 0 &&
                                 bytes >= options_.virtual_arena_bytes;
      try {
        if (!virtual_arena || !map_virtual_arena(bytes)) {
          // Whole 512-byte units: the plan's end can be a multiple of 128.
          const std::size_t whole = round_up(bytes, kPlanAlignment);
          arena_.base = static_cast<char*>(upstream_.memory->allocate(whole, stream_.value_or(kDefaultStream)));
          arena_.bytes = whole;
        }
      } catch (const OutOfMemoryError&) {
        // No room for the arena now: the cache serves the coming iteration,
        // which is observed and planned again at the next step().
        ++stats_.arena_refused;
        return false;
      }
    }
  }
  stats_.arena_bytes = reserved_bytes(arena_);
  return true;
}

void PlannedAllocator::put_in_force(IterationPlan plan, bool new_shape) {
  // A fresh arena, as large as the largest kept plan needs (the one this
  // plan replaces aside): the shapes that come back then switch plans
  // without a device call.
  retire_arena();
  cache_.empty_cache();
  plan_.reset();
  ++plan_id_;
  mode_ = Mode::kServing;
  if (new_shape) shape_in_force_ = SIZE_MAX;
  const std::size_t replaced = shape_in_force_ != SIZE_MAX ? shape_in_force_ : shape_to_replace();
  if (!take_arena(std::max(plan.arena, largest_kept_arena(replaced)))) return;
  plan_ = std::move(plan);
  cycles_.assign(plan_->sizes.size(), false);
  used_.assign(plan_->sizes.size(), false);
  keep_shape();
}

std::size_t PlannedAllocator::largest_kept_arena(std::size_t except) const {
  std::size_t bytes = 0;
  for (std::size_t k = 0; k < shapes_.size(); ++k)
    if (k != except) bytes = std::max(bytes, shapes_[k].plan.arena);
  return bytes;
}

std::size_t PlannedAllocator::shape_to_replace() const {
  if (options_.max_shapes == 0 || shapes_.size() < options_.max_shapes) return SIZE_MAX;
  // The one that served longest ago makes room.
  return static_cast<std::size_t>(
      std::min_element(shapes_.begin(), shapes_.end(),
                       [](const Shape& a, const Shape& b) { return a.last_used < b.last_used; }) -
      shapes_.begin());
}

void PlannedAllocator::keep_shape() {
  if (options_.max_shapes == 0 || plan_->sizes.empty()) return;
  if (shape_in_force_ == SIZE_MAX) {
    shape_in_force_ = shape_to_replace();
    if (shape_in_force_ == SIZE_MAX) {
      shapes_.emplace_back();
      shape_in_force_ = shapes_.size() - 1;
    }
  }
  Shape& shape = shapes_[shape_in_force_];
  shape.plan = *plan_;
  shape.cycles = cycles_;
  shape.last_used = stats_.iterations;
  stats_.shapes = shapes_.size();
}

void PlannedAllocator::diverged(std::size_t index, std::size_t bytes) {
  // What the plan in force learned stays with it.
  if (shape_in_force_ != SIZE_MAX) shapes_[shape_in_force_].cycles = cycles_;
  // The iteration so far was the plan in force's first `index` requests: a
  // kept plan that starts the same and goes on with this size, the most
  // recently used first.
  const auto& sizes = plan_->sizes;
  std::size_t best = SIZE_MAX;
  for (std::size_t k = 0; k < shapes_.size(); ++k) {
    const std::vector<std::size_t>& other = shapes_[k].plan.sizes;
    if (k == shape_in_force_ || other.size() <= index || other[index] != bytes ||
        !std::equal(sizes.begin(), sizes.begin() + static_cast<std::ptrdiff_t>(index), other.begin()))
      continue;
    if (best == SIZE_MAX || shapes_[k].last_used > shapes_[best].last_used) best = k;
  }
  ++plan_id_;
  shapes_changed_ = true;
  if (best != SIZE_MAX) {
    Shape& shape = shapes_[best];
    ++stats_.shape_switches;
    shape.last_used = stats_.iterations;
    shape_in_force_ = best;
    // An arena too small is replaced by one for every kept plan.
    if (!take_arena(arena_.bytes >= shape.plan.arena ? shape.plan.arena : largest_kept_arena(SIZE_MAX))) {
      plan_.reset();
      return;
    }
    plan_ = shape.plan;
    cycles_ = shape.cycles;
    // The requests so far took the old plan's places; the new one's are
    // theirs in name only.
    used_.assign(plan_->sizes.size(), false);
    std::fill(used_.begin(), used_.begin() + static_cast<std::ptrdiff_t>(index), true);
    cursor_ = index;
    return;
  }
  // A new shape: recorded from here on. The arena goes back, now or when
  // the last block this iteration took from it is freed.
  retire_arena();
  plan_.reset();
  shape_in_force_ = SIZE_MAX;
  begin_recording();
}

void PlannedAllocator::begin_recording() {
  mode_ = Mode::kRecording;
  ++stats_.recordings;
  // The recording takes its requests from the device: what the cache holds
  // free would sit idle beside them.
  recording_on_device_ = options_.record_from_device && recorded_from_device_ < options_.max_from_device;
  if (recording_on_device_) cache_.empty_cache();
}

void PlannedAllocator::step() {
  std::lock_guard lock(mutex_);
  ++stats_.iterations;
  if (pending_) {
    // A plan given by the caller replaces whatever was in force.
    IterationPlan given = std::move(*pending_);
    pending_.reset();
    put_in_force(std::move(given), /*new_shape=*/true);
  } else if (mode_ == Mode::kRecording) {
    recording_on_device_ = false;
    const bool first_recording = std::exchange(first_recording_, false);
    if (overflowed_) {
      // Too long to plan: record the next one, through the cache.
    } else if (options_.skip_set_up && first_recording && observed_live_ > 0 && observed_live_ * 4 >= observed_peak_) {
      begin_recording();  // set-up: plan the next iteration instead
    } else {
      plan_observed(/*new_shape=*/true);
    }
  } else if (mode_ == Mode::kServing && !observed_.empty() && !overflowed_ && arena_.live.empty()) {
    // The iteration did not follow the plan: a request missed, or part of
    // the plan went unused (what only the first iteration allocates). Only
    // with nothing live in the arena: a block that outlives its iteration
    // there (a leak the plan took for a temporary) would keep a replaced
    // arena from ever going back.
    // Or a request the plan expected to stay was freed within it (the
    // first iteration's gradients can be the next ones' temporaries).
    // Or no plan is in force: the device had no room for its arena.
    // The new plan replaces the one it refines.
    const bool unused = std::find(used_.begin(), used_.end(), false) != used_.end();
    if (!plan_ || missed_this_iteration_ > 0 || unused || stayed_less_this_iteration_ > 0)
      plan_observed(/*new_shape=*/false);
  }
  if (mode_ == Mode::kCaching) {
    first_recording_ = true;
    begin_recording();
  }
  observed_.clear();
  observed_ptrs_.clear();
  clock_ = 0;
  overflowed_ = false;
  cursor_ = 0;
  missed_this_iteration_ = 0;
  stayed_less_this_iteration_ = 0;
  requests_this_iteration_ = 0;
  observed_live_ = observed_peak_ = 0;
  used_.assign(plan_ ? plan_->sizes.size() : 0, false);
}

void PlannedAllocator::plan_observed(bool new_shape) {
  std::vector<std::size_t> sizes;
  std::vector<std::int64_t> born, died, pinned;
  // Requests on other streams are never served from a plan: they are no
  // part of it (and no entry of it to go unused). The first requests keep
  // the places the arena gave them: shapes that start alike then place
  // their start alike, and switch plans without a conflict.
  for (const Recorded& r : observed_) {
    if (!r.plannable) continue;
    sizes.push_back(r.size);
    born.push_back(r.born);
    died.push_back(r.died);
    pinned.push_back(r.died > r.born ? r.offset : -1);
  }
  ++stats_.plans;
  put_in_force(plan_iteration(sizes, born, died, options_.solve_seconds, &pinned), new_shape);
}

void PlannedAllocator::use_plan(IterationPlan plan) {
  check_plan(plan, "use_plan");
  std::lock_guard lock(mutex_);
  pending_ = std::move(plan);
}

std::optional<IterationPlan> PlannedAllocator::plan() const {
  std::lock_guard lock(mutex_);
  return plan_;
}

PlannedStats PlannedAllocator::planned_stats() const {
  std::lock_guard lock(mutex_);
  PlannedStats s = stats_;
  if (small_) s.device_bytes += small_->device_bytes();
  return s;
}

bool PlannedAllocator::take_range(std::int64_t offset, std::int64_t end) {
  auto& live = arena_.live;
  auto next = live.lower_bound(offset);
  if (next != live.end() && next->first < end) return false;
  if (next != live.begin() && std::prev(next)->second > offset) return false;
  live.emplace_hint(next, offset, end);
  return true;
}

void* PlannedAllocator::fill_gap(std::size_t bytes) {
  // Off the plan: a gap of the arena that is free at the moment, highest
  // first (planned blocks tend to start low), before the cache grows. Range
  // ends are multiples of 128, so an aligned place is looked for in each.
  const auto need = static_cast<std::int64_t>(rounded(bytes));
  const auto alignment = static_cast<std::int64_t>(alignment_of(bytes));
  std::int64_t top = static_cast<std::int64_t>(arena_.bytes);
  for (auto it = arena_.live.rbegin();; ++it) {
    const std::int64_t bottom = it == arena_.live.rend() ? 0 : it->second;
    if (top >= need) {
      const std::int64_t offset = (top - need) / alignment * alignment;
      if (offset >= bottom) {
        if (!take_range(offset, offset + need)) return nullptr;
        ++stats_.gap_filled;
        return arena_.base + offset;
      }
    }
    if (it == arena_.live.rend()) return nullptr;
    top = it->first;
  }
}

void* PlannedAllocator::do_allocate(std::size_t bytes, StreamId stream) {
  if (bytes == 0) return nullptr;
  std::lock_guard lock(mutex_);
  if (!stream_) stream_ = stream;
  const bool planned_stream = stream == *stream_;
  // Requests on the planned stream so far this iteration, and whether each
  // was the plan's request at its position: a first difference early in
  // the iteration is a different shape.
  const std::size_t index = planned_stream ? requests_this_iteration_++ : SIZE_MAX;
  try {
    return allocate_locked(bytes, stream, index);
  } catch (...) {
    // A retry of this request is the same request, at the same place.
    if (planned_stream) --requests_this_iteration_;
    throw;
  }
}

void* PlannedAllocator::allocate_locked(std::size_t bytes, StreamId stream, std::size_t index) {
  const bool planned_stream = index != SIZE_MAX;
  const std::size_t cursor_before = cursor_;
  if (mode_ == Mode::kServing && plan_ && planned_stream && index == cursor_ && index < kShapeWindow &&
      options_.max_shapes > 0 && (index >= plan_->sizes.size() || plan_->sizes[index] != bytes))
    diverged(index, bytes);
  void* p = nullptr;
  bool kept = false;  // the plan expects this request to outlive the iteration
  if (mode_ == Mode::kServing && plan_ && planned_stream) {
    // The unused entry of this size nearest to where the plan expects the
    // request: ahead of it when this iteration skips what the recorded one
    // allocated, behind it when ops were reordered. The nearest wins
    // whether the plan placed it or expects it to outlive the iteration, so
    // a request that stays does not take a temporary's place in the arena.
    bool busy = false;
    std::size_t kept_entry = SIZE_MAX;
    const std::size_t n = plan_->sizes.size();
    const auto try_entry = [&](std::size_t k) {
      if (k >= n || plan_->sizes[k] != bytes || used_[k]) return false;
      if (plan_->offsets[k] < 0) {
        used_[k] = true;
        kept_entry = k;
        cursor_ = k + 1;
        return true;
      }
      const std::int64_t offset = plan_->offsets[k];
      if (!take_range(offset, offset + static_cast<std::int64_t>(rounded(bytes)))) {
        busy = true;
        return false;
      }
      used_[k] = true;
      cursor_ = k + 1;
      p = arena_.base + offset;
      return true;
    };
    for (std::size_t d = 0; d < options_.look_ahead && !p && kept_entry == SIZE_MAX; ++d) {
      if (try_entry(cursor_ + d)) break;
      if (d < cursor_ && try_entry(cursor_ - 1 - d)) break;
    }
    kept = kept_entry != SIZE_MAX;
    if (p) ++stats_.planned;
    // Expected to stay: an allocation of its own holds it exactly, unless
    // the entry's block was seen to last into the next iteration only.
    if (kept && options_.record_from_device && !cycles_[kept_entry]) {
      try {
        p = allocate_from_device(bytes, stream, kept_entry);
      } catch (const OutOfMemoryError&) {
        used_[kept_entry] = false;  // a retry may still take it
        cursor_ = cursor_before;
        throw;
      }
    }
    if (!p && !kept && options_.fill_gaps && bytes <= arena_.bytes) {
      p = fill_gap(bytes);
      if (p) ++missed_this_iteration_;  // off the plan: the next iteration is planned again
    }
    if (!p && !kept) {
      stats_.missed_busy += busy;
      ++stats_.missed;
      ++missed_this_iteration_;
    }
  }
  if (!p && mode_ == Mode::kRecording && recording_on_device_ && !overflowed_ &&
      recorded_from_device_ < options_.max_from_device && observed_.size() < options_.max_observed && planned_stream) {
    p = allocate_from_device(bytes, stream, SIZE_MAX);
    ++recorded_from_device_;
  }
  if (!p) p = cache_.allocate(bytes, stream);
  if (mode_ != Mode::kCaching && !overflowed_) {
    if (observed_.size() >= options_.max_observed) {
      overflowed_ = true;
      observed_.clear();
      observed_ptrs_.clear();
    } else {
      const bool in_arena = planned_stream && index < kShapeWindow && arena_.holds(p);
      observed_.push_back({bytes, clock_++, -1, planned_stream, in_arena ? static_cast<char*>(p) - arena_.base : -1});
      observed_ptrs_[p] = observed_.size() - 1;
      observed_live_ += static_cast<std::int64_t>(bytes);
      observed_peak_ = std::max(observed_peak_, observed_live_);
    }
  }
  return p;
}

void PlannedAllocator::observe_free(void* ptr) {
  if (auto it = observed_ptrs_.find(ptr); it != observed_ptrs_.end()) {
    observed_[it->second].died = clock_++;
    observed_live_ -= static_cast<std::int64_t>(observed_[it->second].size);
    observed_ptrs_.erase(it);
  }
}

void PlannedAllocator::do_deallocate(void* ptr, std::size_t bytes, StreamId stream) noexcept {
  (void)bytes;  // the cache knows every block's size
  if (ptr) free(ptr, stream);
}

FreeStatus PlannedAllocator::free(void* ptr, StreamId stream) {
  if (!ptr) return FreeStatus::kOk;
  std::lock_guard lock(mutex_);
  const bool born_this_iteration = mode_ == Mode::kServing && observed_ptrs_.count(ptr) > 0;
  if (mode_ != Mode::kCaching) observe_free(ptr);
  if (arena_.holds(ptr)) {
    if (arena_.live.erase(static_cast<char*>(ptr) - arena_.base) == 0) return FreeStatus::kUnknownPointer;
    return FreeStatus::kOk;
  }
  for (auto it = retired_.begin(); it != retired_.end(); ++it) {
    if (!it->holds(ptr)) continue;
    if (it->live.erase(static_cast<char*>(ptr) - it->base) == 0) return FreeStatus::kUnknownPointer;
    if (it->live.empty()) {
      free_arena(*it);
      retired_.erase(it);
    }
    return FreeStatus::kOk;
  }
  if (auto it = from_device_.find(ptr); it != from_device_.end()) {
    const DeviceBlock block = it->second;
    stayed_less_this_iteration_ += born_this_iteration;
    // Freed in a later iteration than its own (an overflowed iteration
    // keeps no record of what it allocated, so it proves nothing).
    if (!born_this_iteration && !overflowed_ && block.entry != SIZE_MAX && block.plan == plan_id_)
      cycles_[block.entry] = true;
    release_device_block(ptr, block.bytes, block.small, stream);
    if (!block.small) stats_.device_bytes -= block.bytes;
    from_device_.erase(it);
    return FreeStatus::kOk;
  }
  return cache_.free(ptr, stream);
}

}  // namespace gpumem::alloc
