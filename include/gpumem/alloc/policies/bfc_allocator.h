#pragma once
// TensorFlow's BFC ("best-fit with coalescing") allocator, as a policy that
// trace replay compares against: what a trace would have reserved under
// TensorFlow/JAX's GPU allocator.
//
// Faithful to tsl::BFCAllocator (third_party/xla/xla/tsl/framework/
// bfc_allocator.{h,cc}; tensorflow/core/common_runtime/bfc_allocator.cc
// before the move):
// - requests are rounded up to 256 bytes (kMinAllocationSize);
// - free chunks sit in 21 bins by size (bin i holds [256 << i, 256 << (i+1)),
//   the last holds everything larger), each ordered by (size, address); a
//   request searches from its own bin upwards and takes the first chunk that
//   fits, i.e. the smallest, lowest-addressed one;
// - a chunk is split only when it is at least twice the rounded request or
//   the remainder is at least the internal-fragmentation cap (128 MiB, or
//   fragmentation_fraction * memory_limit); otherwise the caller gets the
//   whole chunk;
// - a freed chunk merges with its free neighbours inside its region (never
//   across regions);
// - regions come from the upstream by TF's Extend(): with allow_growth the
//   first is min(memory_limit, 2 MiB), a request larger than the current
//   region size doubles it until it fits, and each region that did not need
//   that doubles it for the next; an upstream failure retries at 0.9x the
//   size down to the request; without allow_growth one region of the whole
//   memory_limit is taken by the first allocation.
//
// Regions are never given back before destruction. (TF can, with its
// garbage_collection option, free wholly free regions when it would
// otherwise run out; that is not modelled.) Nor are TF's timestamped frees
// (freed_by_count), retries that wait for other threads' frees, spatial
// partitioning or alignment above 256 bytes. BFC is stream-agnostic: the
// stream argument is ignored.
//
// Thread-safe: one mutex, as in TF.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpumem/alloc/memory_resource.h"

namespace gpumem::alloc {

struct BfcOptions {
  // The most bytes of regions the allocator may take from the upstream
  // (TF's total_memory). 0: the upstream's physical capacity, when it is a
  // VirtualMemory (the simulated device is); otherwise an InputError.
  std::size_t memory_limit = 0;
  // TF's allow_growth (the default of tsl::BFCAllocator::Options, and what
  // TF_FORCE_GPU_ALLOW_GROWTH=true sets). Off: one region of memory_limit.
  bool allow_growth = true;
  // The first region with allow_growth: current TF uses 2 MiB (older
  // versions' constructor used 1 MiB). Capped by memory_limit and rounded up
  // to 256 bytes.
  std::size_t initial_region_bytes = std::size_t{2} << 20;
  // TF's Options::fragmentation_fraction: when > 0, the split cap is this
  // share of memory_limit instead of 128 MiB.
  double fragmentation_fraction = 0;
};

// What the allocator holds, in TF's AllocatorStats terms.
struct BfcStats {
  std::size_t bytes_in_use = 0;  // chunks handed out (rounded, whole chunks)
  std::size_t peak_bytes_in_use = 0;
  std::size_t pool_bytes = 0;  // regions taken from the upstream
  std::size_t peak_pool_bytes = 0;
  std::size_t bytes_limit = 0;  // memory_limit
  std::uint64_t num_allocs = 0;
  std::size_t largest_alloc_size = 0;
  std::size_t largest_free_chunk = 0;
  std::size_t regions = 0;
};

// A chunk as a test or a report sees it.
struct BfcChunk {
  std::uintptr_t address;
  std::size_t size;
  bool in_use;
};

class BfcAllocator final : public MemoryResource {
 public:
  // `upstream` must outlive the allocator. Throws InputError when
  // memory_limit is 0 and the upstream's capacity is unknown.
  explicit BfcAllocator(MemoryResource& upstream, BfcOptions options = {});
  ~BfcAllocator() override;  // gives every region back
  BfcAllocator(const BfcAllocator&) = delete;
  BfcAllocator& operator=(const BfcAllocator&) = delete;

  std::string name() const override { return "bfc"; }

  BfcStats stats() const;
  // Sizes of the regions taken from the upstream, in the order taken.
  std::vector<std::size_t> region_sizes() const;
  // Every chunk of every region, by address.
  std::vector<BfcChunk> chunks() const;
  // The bytes a request of `bytes` occupies: rounded up to 256.
  static std::size_t rounded_bytes(std::size_t bytes) noexcept;

 protected:
  // Throws OutOfMemoryError, worded as TF's log line.
  void* do_allocate(std::size_t bytes, StreamId stream) override;
  // Aborts on a pointer this allocator did not hand out (TF CHECK-fails).
  void do_deallocate(void* ptr, std::size_t bytes, StreamId stream) noexcept override;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpumem::alloc
