#pragma once
// What the caching allocator holds at one moment: every segment with its
// blocks. Shaped like PyTorch's torch.cuda.memory_snapshot() segments.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "gpumem/alloc/memory_resource.h"
#include "gpumem/alloc/stats.h"

namespace gpumem::alloc {

enum class BlockState : std::uint8_t {
  kAllocated,    // handed to a caller
  kPendingFree,  // freed, waiting for another stream's work to finish
  kInactive,     // free and cached
};
const char* state_name(BlockState state);  // "active_allocated", "active_pending_free", "inactive"

struct BlockSnapshot {
  std::uint64_t address = 0;
  std::uint64_t size = 0;
  std::uint64_t requested_size = 0;  // 0 unless allocated or pending
  BlockState state = BlockState::kInactive;
  std::string tag;
};

struct SegmentSnapshot {
  std::uint64_t address = 0;
  std::uint64_t total_size = 0;  // bytes reserved (mapped, for expandable)
  std::uint64_t allocated_size = 0;
  std::uint64_t active_size = 0;
  std::uint64_t requested_size = 0;
  StreamId stream = kDefaultStream;
  PoolKind pool = PoolKind::kLarge;
  bool expandable = false;
  // Blocks in address order. For an expandable segment only the mapped part
  // is listed: blocks that lie in unmapped space are left out.
  std::vector<BlockSnapshot> blocks;
};

struct Snapshot {
  std::vector<SegmentSnapshot> segments;  // in address order
};

// Stable JSON (documented in docs/allocator.md): {"segments":[{"address":..,
// "total_size":.., "allocated_size":.., "active_size":.., "requested_size":..,
// "stream":.., "segment_type":"small"|"large", "expandable":bool,
// "blocks":[{"address":..,"size":..,"requested_size":..,"state":..,"tag":..}]}]}
nlohmann::json to_json(const Snapshot& snapshot);

}  // namespace gpumem::alloc
