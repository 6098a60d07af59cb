#pragma once
// RMM's pool_memory_resource, as a policy that trace replay compares
// against: what a trace would have reserved under RAPIDS' pool allocator.
//
// Faithful to rmm::mr::pool_memory_resource over detail::
// stream_ordered_memory_resource and detail::coalescing_free_list
// (include/rmm/mr/device/pool_memory_resource.hpp and detail/*.hpp; newer
// releases moved them to cpp/include/rmm/mr/):
// - sizes are rounded up to 256 bytes (rmm::CUDA_ALLOCATION_ALIGNMENT);
// - each stream has its own free list, ordered by address. A request takes
//   the best fit (smallest block that fits, lowest address among equals) from
//   its stream's list; failing that, the best fit in another stream's list
//   (the remainder stays in that list); failing that, it merges other
//   streams' lists into its own one at a time until a block fits; failing
//   that, the pool grows;
// - a block is split exactly to the request, the remainder going back to
//   the list;
// - a freed block goes to the freeing stream's list and merges with
//   address-contiguous free neighbours, but never across the boundary of two
//   upstream allocations (RMM's is_head flag), even when the upstream
//   happened to place them back to back;
// - growth (expand_pool/size_to_grow): without a maximum, the pool grows by
//   max(request, current pool size), i.e. it doubles; with a maximum, by
//   max(request, half of what is left below the maximum), and a request
//   larger than what is left fails. An upstream failure retries at half the
//   size down to the request (try_to_expand);
// - the pool never shrinks: memory goes back only on release() or
//   destruction.
//
// RMM orders reuse across streams with CUDA events (cudaStreamWaitEvent on
// the taking stream); that changes when work runs, not which memory is used,
// so it is not modelled. RMM keys its stream lists by event handle, an
// arbitrary order; here other streams are tried in ascending stream number.
//
// Thread-safe: one mutex, as in RMM.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpumem/alloc/memory_resource.h"

namespace gpumem::alloc {

struct PoolResourceOptions {
  // Bytes taken from the upstream at construction, a multiple of 256. 0
  // starts empty and grows on demand. Current RMM requires this argument;
  // RMM before 24.02 (and its Python API still) defaulted to half of the
  // device's free memory, min(free, total / 2) rounded up to 256.
  std::size_t initial_pool_size = 0;
  // The most the pool may hold, a multiple of 256; none: unbounded (RMM's
  // default, "all of the available memory").
  std::optional<std::size_t> maximum_pool_size = std::nullopt;
};

struct PoolStats {
  std::size_t pool_size = 0;        // bytes taken from the upstream
  std::size_t upstream_blocks = 0;  // upstream allocations held
  std::size_t bytes_in_use = 0;     // handed out, rounded to 256
  std::size_t free_bytes = 0;       // in every stream's free list
  std::size_t free_blocks = 0;
  std::size_t largest_free_block = 0;
  std::size_t free_lists = 0;  // streams with a free list
};

struct PoolBlock {
  std::uintptr_t address;
  std::size_t size;
};

class PoolResource final : public MemoryResource {
 public:
  // `upstream` must outlive the pool. Takes initial_pool_size from the
  // upstream now. Throws InputError for a size that is not a multiple of 256
  // or an initial size above the maximum, and OutOfMemoryError when the
  // upstream cannot give the initial pool.
  explicit PoolResource(MemoryResource& upstream, PoolResourceOptions options = {});
  ~PoolResource() override;  // release()
  PoolResource(const PoolResource&) = delete;
  PoolResource& operator=(const PoolResource&) = delete;

  std::string name() const override { return "rmm-pool"; }

  // Gives every upstream allocation back and forgets all blocks, live ones
  // included (as RMM's release()); the pool then grows again from empty.
  void release();

  PoolStats stats() const;
  std::size_t pool_size() const;
  // The free list of `stream`, by address (empty when it has none).
  std::vector<PoolBlock> free_list(StreamId stream) const;
  // Every upstream allocation the pool holds, by address.
  std::vector<PoolBlock> upstream_blocks() const;

 protected:
  // Throws OutOfMemoryError, worded as RMM's.
  void* do_allocate(std::size_t bytes, StreamId stream) override;
  // Aborts on a pointer the pool did not hand out.
  void do_deallocate(void* ptr, std::size_t bytes, StreamId stream) noexcept override;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpumem::alloc
