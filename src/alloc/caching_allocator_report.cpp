// What the caching allocator reports about itself beyond its counters: free
// space, the out-of-memory message, snapshots. Each walks every block: for
// messages and monitoring, never for the hot path.
#include "alloc/caching_allocator_impl.h"

#include <fmt/format.h>

#include "gpumem/common/units.h"

namespace gpumem::alloc {

FreeSpace CachingAllocator::Impl::free_space_locked() const {
  // What could be handed out without new device memory: free blocks'
  // mapped bytes.
  std::size_t largest_free = 0, total_free = 0;
  for (auto& [base, s] : segments_) {
    for (Block* b = s->first; b; b = b->next) {
      if (!b->is_free() && !b->in_thread_cache) continue;
      std::size_t usable = b->size;
      if (s->expandable) {
        const std::size_t g = up_.vmm->granularity();
        usable = 0;
        std::size_t run = 0;
        // Past the highest granule ever mapped, nothing is.
        const std::uintptr_t end = std::min(b->address + b->size, s->base + s->mapped.size() * g);
        for (std::uintptr_t a = round_up(b->address, g); a + g <= end; a += g) {
          run = s->granule_mapped((a - s->base) / g) ? run + g : 0;
          usable += s->granule_mapped((a - s->base) / g) ? g : 0;
          largest_free = std::max(largest_free, run);
        }
      } else {
        largest_free = std::max(largest_free, b->size);
      }
      total_free += usable;
    }
  }
  return FreeSpace{total_free, largest_free};
}

void CachingAllocator::Impl::out_of_memory(std::size_t bytes, StreamId stream, std::string_view why) {
  ++stats_.num_ooms;
  history_.record(HistoryAction::kOom, 0, bytes, bytes, stream, kNoTag);
  CacheLocks caches(caches_);
  fold_caches_locked();
  const FreeSpace space = free_space_locked();
  const std::size_t largest_free = space.largest_block, total_free = space.free_bytes;
  std::vector<Block*> live;
  live_.for_each([&](std::uintptr_t, Block* b) { live.push_back(b); });
  for (const auto& c : caches_) c->live.for_each([&](std::uintptr_t, Block* b) { live.push_back(b); });
  std::size_t shown = std::min<std::size_t>(live.size(), 5);
  std::partial_sort(live.begin(), live.begin() + long(shown), live.end(),
                    [](Block* a, Block* b) { return a->size > b->size; });
  std::string largest;
  for (std::size_t i = 0; i < shown; ++i) {
    std::string tag = tags_.name(live[i]->tag);
    largest += fmt::format("{}{} ({})", i ? ", " : "", format_bytes(live[i]->size),
                           tag.empty() ? std::string("untagged") : tag);
  }
  // The same, grouped by tag: which part of the program holds the memory.
  std::map<TagId, std::pair<std::size_t, std::size_t>> by_tag;  // bytes, count
  for (Block* b : live) {
    by_tag[b->tag].first += b->size;
    ++by_tag[b->tag].second;
  }
  std::vector<std::pair<TagId, std::pair<std::size_t, std::size_t>>> groups(by_tag.begin(), by_tag.end());
  std::sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  std::string grouped;
  for (std::size_t i = 0; i < std::min<std::size_t>(groups.size(), 5); ++i) {
    std::string tag = tags_.name(groups[i].first);
    grouped += fmt::format("{}{} {} in {}", i ? ", " : "", tag.empty() ? std::string("untagged") : tag,
                           format_bytes(groups[i].second.first), format_count(groups[i].second.second));
  }
  const std::size_t allocated = static_cast<std::size_t>(stats_.allocated_bytes[kStatAll].current);
  const double fragmentation = total_free ? 1.0 - double(largest_free) / double(total_free) : 0.0;
  std::string message = fmt::format(
      "out of memory: tried to allocate {} on stream {}{}{}; capacity {}{}, allocated {}, reserved {} "
      "({} reserved but unallocated); largest free block {}; fragmentation {:.1f}% (1 - largest free / total free); "
      "largest live allocations: {}; live by tag: {}",
      format_bytes(bytes), stream, why.empty() ? "" : ": ", why,
      up_.capacity ? format_bytes(up_.capacity) : std::string("unknown"),
      limit_ != SIZE_MAX ? fmt::format(" (reserved limit {})", format_bytes(limit_)) : std::string(),
      format_bytes(allocated), format_bytes(reserved()), format_bytes(reserved() - std::min(reserved(), allocated)),
      format_bytes(largest_free), 100.0 * fragmentation, largest.empty() ? std::string("none") : largest,
      grouped.empty() ? std::string("none") : grouped);
  if (!config_.expandable_segments && reserved() - std::min(reserved(), allocated) >= bytes)
    message += "; the memory exists but is fragmented: GPUMEM_ALLOC_CONF=expandable_segments:true avoids this";
  throw OutOfMemoryError(message, bytes);
}

Snapshot CachingAllocator::Impl::snapshot() const {
  std::lock_guard lock(mutex_);
  CacheLocks caches(caches_);
  Snapshot out;
  for (const auto& [base, s] : segments_) {
    SegmentSnapshot seg;
    seg.address = s->base;
    seg.total_size = s->reserved_bytes();
    seg.stream = s->pool->stream;
    seg.pool = s->pool->kind;
    seg.expandable = s->expandable;
    for (const Block* b = s->first; b; b = b->next) {
      BlockSnapshot block;
      block.address = b->address;
      block.size = b->size;
      block.state = b->in_thread_cache ? BlockState::kInactive
                    : b->allocated     ? BlockState::kAllocated
                                       : (b->pending_events ? BlockState::kPendingFree : BlockState::kInactive);
      if (block.state != BlockState::kInactive) {
        block.requested_size = b->requested;
        block.tag = tags_.name(b->tag);
        seg.active_size += b->size;
        seg.requested_size += b->requested;
        if (block.state == BlockState::kAllocated) seg.allocated_size += b->size;
      } else if (s->expandable) {
        const std::size_t g = up_.vmm->granularity();
        std::uintptr_t first = round_up(b->address, g), last = (b->address + b->size) / g * g;
        bool any = first < last ? false : true;  // a block inside shared granules is mapped
        last = std::min(last, s->base + s->mapped.size() * g);
        for (std::uintptr_t a = first; a < last && !any; a += g) any = s->granule_mapped((a - s->base) / g);
        if (!any) continue;
      }
      seg.blocks.push_back(std::move(block));
    }
    out.segments.push_back(std::move(seg));
  }
  return out;
}

}  // namespace gpumem::alloc
