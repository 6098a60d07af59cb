#pragma once
// The caching allocator's settings and the configuration string that sets
// them (GPUMEM_ALLOC_CONF), shaped like PYTORCH_CUDA_ALLOC_CONF:
// "key:value,key:value". Sizes in keys ending in _mb are MiB.
#include <cstddef>
#include <string>
#include <string_view>

namespace gpumem::alloc {

struct AllocatorConfig {
  // Requests are rounded up to a multiple of this (and to at least this);
  // a power of two, at least 512.
  std::size_t round_bytes = 512;
  // Requests up to this size come from the small pool.
  std::size_t small_size = std::size_t{1} << 20;
  // Segment size for the small pool.
  std::size_t small_segment = std::size_t{2} << 20;
  // Large requests below min_large_alloc get a segment of large_segment bytes
  // (room for more requests); larger ones get the request rounded up to
  // large_round. With release_before_new_peak, a roomy segment is made only
  // when it does not raise the reserved high-water mark or when rounding the
  // request up would waste over a quarter of it. large_segment == 0: every
  // large segment is the request rounded up to large_round.
  std::size_t large_segment = std::size_t{20} << 20;
  std::size_t min_large_alloc = std::size_t{10} << 20;
  std::size_t large_round = std::size_t{2} << 20;
  // A free large-pool block is split only when the remainder exceeds this
  // (smaller remainders stay with the allocation as internal waste); a
  // small-pool block is split when the remainder is at least round_bytes.
  std::size_t large_split_remainder = std::size_t{1} << 20;
  // Blocks at least this big are never split for smaller requests, and a
  // request of at least this size never takes a block more than
  // oversize_slack larger. Unlimited by default.
  std::size_t max_split_size = SIZE_MAX;
  std::size_t oversize_slack = std::size_t{20} << 20;
  // When reserved memory would exceed fraction * capacity, free cached
  // blocks that have not been reused for longest first (0 disables).
  double garbage_collection_threshold = 0.0;
  // Grow virtual ranges per pool and stream by mapping granules, instead of
  // allocating separate segments; another range opens only when no stretch
  // of the open ones is long enough. Needs a VirtualMemory upstream.
  bool expandable_segments = false;
  // Before reserving memory that would raise the reserved high-water mark,
  // give fully free cached segments back to the device. Keeps peak reserved
  // down at the price of an upstream call when a new peak is set.
  bool release_before_new_peak = true;
  // In expandable mode the same guard unmaps free granules instead, and a
  // block that needs new granules goes where it needs the fewest (another
  // free block, or the end of one that lies beside a live block).
  // Byte budget on reserved memory (0: the device's capacity).
  std::size_t reserved_limit = 0;
  // Keep a ring buffer of this many events for history (0: off).
  std::size_t history_capacity = 0;
  // Publish statistics in shared memory for `gpumem exporter` every this
  // many milliseconds (0: off). Read by the owners of allocators that
  // publish: the C API and the PyTorch plugin (which publishes every 5 ms
  // unless told 0); a C++ caller makes a StatsPublisher itself. A preset
  // leaves it as it was.
  std::size_t publish_interval_ms = 0;
  // Planned mode (planned_allocator.h): the C API serves iterations marked
  // with gpumem_step() from a plan of one recorded iteration. A preset
  // leaves it as it was.
  bool planned = false;
  // ... keeping plans for up to this many shapes of iteration (inference at
  // changing batch sizes; PlannedOptions::max_shapes). A preset leaves it.
  std::size_t planned_shapes = 8;
  // ... and, once shapes change, arenas of at least this many bytes over
  // virtual memory (PlannedOptions::virtual_arena_bytes; 0: never). A preset
  // leaves it.
  std::size_t planned_virtual_arena = std::size_t{16} << 20;

  // gpumem's defaults: PyTorch's sizes plus the high-water guard.
  static AllocatorConfig gpumem_defaults() { return {}; }
  // PyTorch's CUDA caching allocator defaults, as documented and as its
  // source sets them: 512-byte rounding, 1 MiB small limit, 2 MiB small and
  // 20 MiB large segments for requests under 10 MiB, large requests rounded to
  // 2 MiB, large blocks split only with more than 1 MiB left, and cached
  // segments kept until an allocation fails.
  static AllocatorConfig pytorch_defaults();
};

// Throws InputError, one line naming the field and its value, unless every
// rule the allocator relies on holds. Every CachingAllocator validates its
// config when it is made (so do the C API and the PyTorch plugin, through
// it), and parse_allocator_config validates what it returns. The rules:
// - round_bytes: a power of two, at least 512 (the free index bins block
//   sizes in 512-byte steps: a smaller block in a bin would be handed out
//   for a larger request);
// - small_segment, large_segment (0: off) and large_round (not 0): multiples
//   of round_bytes, so that every block, and every piece split off one, is;
// - small_segment at least small_size: a small request fits one segment;
// - max_split_size over small_segment and large_segment: a segment at least
//   that big is never split for the smaller requests it is made for;
// - oversize_slack over 0: 0 would refuse even an exact fit;
// - garbage_collection_threshold in [0, 1) (0: off);
// - history_capacity at most 2^28 (its ring buffer is allocated up front);
// - publish_interval_ms at most 60000 (a minute: slower is not monitoring);
// - round_bytes, the segment sizes, large_round and oversize_slack at most
//   2^50 bytes (1 PiB), so the arithmetic on sizes cannot overflow.
// small_size, min_large_alloc, large_split_remainder and reserved_limit are
// only compared with sizes: any value works.
void validate(const AllocatorConfig& config);

// Applies "key:value,key:value" on top of `base`. Keys: preset (gpumem |
// pytorch, applied first wherever it appears), max_split_size_mb,
// garbage_collection_threshold, expandable_segments (true/false),
// release_before_new_peak, round_bytes, small_size_mb, small_segment_mb,
// large_segment_mb, min_large_alloc_mb, large_round_mb,
// large_split_remainder_mb, reserved_limit_mb, history, publish_interval_ms,
// planned (true/false), planned_shapes, planned_virtual_arena_mb. Unknown keys,
// values that do not parse, and a result that fails validate() throw
// InputError naming the key.
AllocatorConfig parse_allocator_config(std::string_view text, AllocatorConfig base = {});

// Reads GPUMEM_ALLOC_CONF from the environment over `base` (base when unset).
AllocatorConfig allocator_config_from_env(AllocatorConfig base = AllocatorConfig::gpumem_defaults());

// The configuration as the string parse_allocator_config reads back.
std::string to_string(const AllocatorConfig& config);

}  // namespace gpumem::alloc
