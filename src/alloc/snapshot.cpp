// The snapshot's JSON form (docs/allocator.md, "Statistics, snapshots, history").
#include "gpumem/alloc/snapshot.h"

#include <nlohmann/json.hpp>

namespace gpumem::alloc {

const char* state_name(BlockState state) {
  switch (state) {
    case BlockState::kAllocated: return "active_allocated";
    case BlockState::kPendingFree: return "active_pending_free";
    case BlockState::kInactive: return "inactive";
  }
  return "unknown";
}

nlohmann::json to_json(const Snapshot& snapshot) {
  nlohmann::json segments = nlohmann::json::array();
  for (const SegmentSnapshot& s : snapshot.segments) {
    nlohmann::json blocks = nlohmann::json::array();
    for (const BlockSnapshot& b : s.blocks) {
      nlohmann::json block = {{"address", b.address},
                              {"size", b.size},
                              {"requested_size", b.requested_size},
                              {"state", state_name(b.state)}};
      if (!b.tag.empty()) block["tag"] = b.tag;
      blocks.push_back(std::move(block));
    }
    segments.push_back({{"address", s.address},
                        {"total_size", s.total_size},
                        {"allocated_size", s.allocated_size},
                        {"active_size", s.active_size},
                        {"requested_size", s.requested_size},
                        {"stream", s.stream},
                        {"segment_type", s.pool == PoolKind::kSmall ? "small" : "large"},
                        {"expandable", s.expandable},
                        {"blocks", std::move(blocks)}});
  }
  return {{"segments", std::move(segments)}};
}

}  // namespace gpumem::alloc
