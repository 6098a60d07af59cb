#pragma once
// Planned mode (issue 17): training steps and fixed-shape inference repeat
// the same allocations, so the best packing of one iteration serves the next
// ones. After the caller marks an iteration's start (step()), the allocator
// records that iteration: every request's size and lifetime, through the
// ordinary caching allocator. At the next step() it plans offsets for the
// requests born and freed within the iteration with gpumem's own solver,
// gives the cache back, reserves one arena of the plan's size, and from then
// on serves each request at the offset planned for the next unused request
// of the same size (looking a few requests ahead, so that an extra or a
// missing request does not derail the rest) when that range is free;
// a size the plan lacks goes to the caching allocator. The recorded
// iteration itself, and what a plan expects to outlive its iteration, take
// device allocations of their own (record_from_device), so that what stays
// holds exactly its bytes and the arena only the temporaries. Every iteration is observed:
// when one missed the plan or left part of it unused (the first iteration
// allocates what later ones do not), it is planned again from what that
// iteration did, once nothing lives in the arena (an arena that a caller's
// use_plan() replaces while blocks in it live is given back when the last
// of them is freed). A first iteration that sets up state (a model, an
// optimizer's) is followed by a second recording, which is planned instead.
// Iterations of other shapes (inference at changing batch sizes) keep plans
// of their own, told apart by their first requests: a kept plan takes over
// in the same arena, and a shape seen for the first time is recorded.
//
// The idea is STAlloc's (2025: plan offline, allocate online); the planner
// is gpumem's (plan/solver.h). Requests on other streams than the first one
// seen are never planned: a plan is only safe in one stream's order.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gpumem/alloc/caching_allocator.h"
#include "gpumem/alloc/config.h"

namespace gpumem::alloc {
namespace detail {
class SmallSlots;
}

// The plan of one iteration: per request, in order, its size and offset in
// the arena (offset -1: it outlived the iteration, and is served outside
// the arena: from the device, or from the cache once it is seen to cycle).
struct IterationPlan {
  std::vector<std::size_t> sizes;
  std::vector<std::int64_t> offsets;
  std::size_t arena = 0;
  bool proven_optimal = false;
};

struct PlannedOptions {
  double solve_seconds = 2.0;  // the planner's time for one iteration
  // How far past the expected request a request may match the plan.
  std::size_t look_ahead = 1024;
  // A request off the plan may take a gap of the arena that is free at the
  // moment before the cache grows for it.
  bool fill_gaps = true;
  // While the first iteration is recorded, and for a request the plan
  // expects to outlive its iteration, go straight to the device: each such
  // request takes an allocation of its own (its size rounded to 512 bytes;
  // under 512 bytes, 128-byte slots of shared 4 KiB chunks).
  // What outlives the recorded iteration (weights, gradients, optimizer
  // state) then holds exactly its bytes, instead of pinning parts of
  // segments the iteration's temporaries shared, and the temporaries are
  // planned into the arena alone. The price is one device call per request
  // in that one iteration (PyTorch's allocator with caching off). false:
  // the cache serves them.
  bool record_from_device = true;
  // ... for at most this many recorded requests in all (the first
  // recording, the one after a set-up iteration, each new shape's): a caller
  // that never calls step() again, or whose shapes never repeat, must not pay
  // a device call per request forever. Later recordings go through the cache.
  std::size_t max_from_device = std::size_t{1} << 16;
  // A first recorded iteration that leaves at least a quarter of the most it
  // had live still allocated (a model it built; the gradients and optimizer
  // state of a first training step) set things up: later iterations do not
  // do that, so the next one is recorded too and planned instead.
  bool skip_set_up = true;
  // Once an iteration has differed from the plan in shape (max_shapes), an
  // arena of at least this many bytes is mapped over virtual memory, where
  // the upstream has it: when a later iteration turns out to be a new shape
  // and the arena in force is given back with a few blocks of that
  // iteration still in it (its input), only the granules those blocks touch
  // stay mapped, instead of the whole arena until the last is freed. The
  // price is the arena rounded up to the granularity (2 MiB on CUDA) and a
  // device synchronization when granules are unmapped, which is why a
  // workload of one shape keeps an arena of its exact size. 0: never.
  std::size_t virtual_arena_bytes = std::size_t{16} << 20;
  // Plans kept for iterations of different shapes (inference at changing
  // batch sizes or sequence lengths), told apart by their first requests in
  // order. When one of an iteration's first 16 requests differs from the
  // plan in force while the ones before it followed the plan, the kept plan
  // that starts like this iteration takes over, in the arena in force when
  // that is large enough (the arena is made as large as the largest kept
  // plan needs); when none does, the iteration is a new shape, recorded (the
  // arena given back first) and planned, and the plan that served longest
  // ago makes room. 0: no shapes told apart (one plan, made again at the
  // step() after an iteration that differs); 1: each different iteration
  // is recorded anew.
  std::size_t max_shapes = 8;
  // An iteration longer than this many requests is not observed further and
  // not planned (a caller that never calls step() again records nothing
  // without bound).
  std::size_t max_observed = std::size_t{1} << 22;
};

// What AllocatorConfig says of planned mode (GPUMEM_ALLOC_CONF's
// planned_shapes and planned_virtual_arena_mb), over the defaults.
PlannedOptions planned_options(const AllocatorConfig& config);

struct PlannedStats {
  std::uint64_t iterations = 0;      // step() calls
  std::uint64_t plans = 0;           // plans made (the first, and re-plans)
  std::uint64_t planned = 0;         // requests served from the arena
  std::uint64_t missed = 0;          // requests the plan had no free entry for, while it was in force
  std::uint64_t missed_busy = 0;     // of those: a planned range of that size was still in use
  std::uint64_t gap_filled = 0;      // requests off the plan placed in a free gap of the arena
  std::size_t arena_bytes = 0;       // device bytes of the arena in force (0: none; granules when virtual)
  std::uint64_t from_device = 0;     // requests given their own device allocation (record_from_device)
  std::size_t device_bytes = 0;      // device bytes held for them now (4 KiB chunks for those under 512 bytes)
  std::uint64_t arena_refused = 0;   // plans whose arena the device had no room for (the cache served instead)
  std::uint64_t recordings = 0;      // iterations recorded: the first, after set-up, each new shape
  std::uint64_t shape_switches = 0;  // switches to another kept plan, early in an iteration
  std::size_t shapes = 0;            // plans kept (max_shapes at most)
};

class PlannedAllocator final : public MemoryResource {
 public:
  explicit PlannedAllocator(Upstream upstream, AllocatorConfig config = AllocatorConfig::gpumem_defaults(),
                            PlannedOptions options = {});
  ~PlannedAllocator() override;
  PlannedAllocator(const PlannedAllocator&) = delete;
  PlannedAllocator& operator=(const PlannedAllocator&) = delete;

  // An iteration begins. The first call starts a recording; a later one
  // puts the plan of a recorded iteration in force (after the set-up
  // iteration, the next one's).
  void step();
  // Serve from `plan` from the next step() on, without recording first (a
  // plan written earlier, e.g. from `gpumem plan` over a recorded trace).
  void use_plan(IterationPlan plan);
  std::optional<IterationPlan> plan() const;
  PlannedStats planned_stats() const;
  // Frees what allocate() returned without its size (the C API's way):
  // kUnknownPointer for a pointer neither the arena nor the cache holds.
  FreeStatus free(void* ptr, StreamId stream);
  // The cache behind the plan (statistics, snapshots, empty_cache()).
  CachingAllocator& cache() noexcept { return cache_; }

  std::string name() const override { return "gpumem-planned"; }

 protected:
  void* do_allocate(std::size_t bytes, StreamId stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, StreamId stream) noexcept override;

 private:
  enum class Mode { kCaching, kRecording, kServing };
  struct Recorded {
    std::size_t size = 0;
    std::int64_t born = 0;
    std::int64_t died = -1;    // -1: still live at the iteration's end
    bool plannable = true;     // on the planned stream
    std::int64_t offset = -1;  // where the arena in force served it, among an iteration's first requests
  };

  struct Arena {
    char* base = nullptr;
    std::size_t bytes = 0;
    std::map<std::int64_t, std::int64_t> live;  // planned ranges in use: offset -> end
    // Over virtual memory: which granules of the range reserved (bytes
    // rounded up to the granularity) are mapped. Empty: one device
    // allocation of `bytes`.
    std::vector<bool> mapped;
    bool holds(const void* p) const { return p >= base && p < base + bytes; }
  };

  // Plan the iteration just observed and put it in force: as a new shape's
  // plan, or as the refinement of the plan in force.
  void plan_observed(bool new_shape);
  void put_in_force(IterationPlan plan, bool new_shape);
  // An arena of at least `bytes`: the one in force when unused and large
  // enough, else a new one. False when the device has no room.
  bool take_arena(std::size_t bytes);
  void begin_recording();
  // The iteration's request `index` (all before it as planned) differs from
  // the plan: the kept plan that goes on like it, or a new recording.
  void diverged(std::size_t index, std::size_t bytes);
  void* fill_gap(std::size_t bytes);  // a free gap of the arena, or nullptr
  // do_allocate() under the lock; `index`: the request's place among the
  // iteration's on the planned stream (SIZE_MAX: another stream).
  void* allocate_locked(std::size_t bytes, StreamId stream, std::size_t index);
  // The kept plan a new shape's plan replaces (SIZE_MAX: there is room).
  std::size_t shape_to_replace() const;
  // The largest arena a kept plan needs, the one at `except` aside.
  std::size_t largest_kept_arena(std::size_t except) const;
  void keep_shape();    // the plan in force joins (or updates) the kept ones
  void retire_arena();  // the arena in force goes; freed now or when its last block is
  void free_arena(Arena& arena) noexcept;
  // An arena over virtual memory maps granules, so what a retired one's
  // live blocks do not touch goes back at once.
  bool map_virtual_arena(std::size_t bytes);
  // What the arena holds of the device: its bytes, or its whole granules.
  std::size_t reserved_bytes(const Arena& arena) const;
  // Gives back a block that took device memory of its own.
  void release_device_block(void* p, std::size_t bytes, bool small, StreamId stream);
  // False when the device refused (what is still mapped stays so).
  bool unmap_unused_granules(Arena& arena) noexcept;
  bool take_range(std::int64_t offset, std::int64_t end);
  void observe_free(void* ptr);
  // `entry`: the plan's entry it serves (SIZE_MAX: the recording's).
  void* allocate_from_device(std::size_t bytes, StreamId stream, std::size_t entry);

  Upstream upstream_;
  CachingAllocator cache_;
  PlannedOptions options_;
  mutable std::mutex mutex_;
  Mode mode_ = Mode::kCaching;
  std::optional<StreamId> stream_;  // the one stream plans serve
  // The iteration under way, as observed (whether served or not).
  std::vector<Recorded> observed_;
  std::unordered_map<void*, std::size_t> observed_ptrs_;  // live pointer -> observed index
  std::int64_t clock_ = 0;
  bool overflowed_ = false;  // the iteration outgrew max_observed
  // The plan in force.
  std::optional<IterationPlan> plan_;
  std::optional<IterationPlan> pending_;  // use_plan()'s, from the next step()
  Arena arena_;                           // the plan's
  std::vector<Arena> retired_;            // replaced arenas with blocks still live
  struct DeviceBlock {
    std::size_t bytes = 0;         // rounded as the plan rounds it
    bool small = false;            // slots of small_, not an allocation of its own
    std::size_t entry = SIZE_MAX;  // the plan entry it served
    std::uint64_t plan = 0;        // ... of which plan (plan_id_)
  };
  std::unordered_map<void*, DeviceBlock> from_device_;  // record_from_device's blocks
  std::unique_ptr<detail::SmallSlots> small_;           // ... those under 512 bytes
  std::uint64_t plan_id_ = 0;                           // plans put in force
  bool recording_on_device_ = false;                    // a recording within max_from_device, while record_from_device
  bool shapes_changed_ = false;   // an iteration differed in shape: arenas over virtual memory from now on
  bool first_recording_ = false;  // the recording under way is the first (set-up is judged on it)
  // Entries expected to outlive the iteration whose block was freed in the
  // next one (gradients freed by zero_grad(set_to_none=True)): they come
  // back every iteration, so the cache serves them, not a device call each.
  std::vector<bool> cycles_;
  std::vector<bool> used_;  // plan entries taken this iteration
  std::size_t cursor_ = 0;  // the next plan entry expected
  std::uint64_t missed_this_iteration_ = 0;
  std::uint64_t stayed_less_this_iteration_ = 0;        // expected to outlive the iteration, freed in it
  std::uint64_t requests_this_iteration_ = 0;           // on the planned stream
  std::size_t recorded_from_device_ = 0;                // recorded requests served by the device, in all
  std::int64_t observed_live_ = 0, observed_peak_ = 0;  // bytes of the iteration's own requests
  // Kept plans (max_shapes), each with what it learned of cycling entries,
  // and when it last served.
  struct Shape {
    IterationPlan plan;
    std::vector<bool> cycles;
    std::uint64_t last_used = 0;
  };
  std::vector<Shape> shapes_;
  std::size_t shape_in_force_ = SIZE_MAX;  // its index in shapes_
  PlannedStats stats_;
};

// A plan as a JSON document, for a job to load before its first iteration:
// {"format":"gpumem-iteration-plan","version":2,"arena_bytes":N,
//  "proven_optimal":B,"requests":[[size,offset],...]} with offset -1 for a
// request served outside the arena (docs/allocator.md).
std::string to_json(const IterationPlan& plan);
// Throws InputError naming `name` and the problem: not that document, a
// size of 0, an offset not a multiple of 512 (128 under 512 bytes) or past the arena, more than
// 2^22 requests, an arena over 2^50 bytes.
IterationPlan iteration_plan_from_json(std::string_view text, const std::string& name);

// The plan of one iteration's requests given as (size, born, died) with
// died -1 for those that outlive it: what PlannedAllocator computes when a
// recording ends, for tools that plan ahead of time.
// `pinned` (optional, one per request): an offset the plan must keep, or -1.
IterationPlan plan_iteration(const std::vector<std::size_t>& sizes, const std::vector<std::int64_t>& born,
                             const std::vector<std::int64_t>& died, double solve_seconds,
                             const std::vector<std::int64_t>* pinned = nullptr);

}  // namespace gpumem::alloc
