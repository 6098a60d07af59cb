// Expandable segments: one virtual range per pool grows by mapping
// granules; a block that needs new ones goes where it needs the fewest.
#include "alloc/caching_allocator_impl.h"

namespace gpumem::alloc {

Block* CachingAllocator::Impl::obtain_expandable(Pool& pool, std::size_t size, std::size_t bytes) {
  if (pool.ranges == 0) create_range(pool, size);
  Block* b = take_free_block(pool, size);
  if (!b) {
    // Holes left no stretch of address space long enough: open another
    // range (address space is cheap; memory is only what gets mapped).
    create_range(pool, size);
    b = take_free_block(pool, size);
  }
  if (!b) out_of_memory(bytes, pool.stream, "no virtual address range is long enough");
  std::size_t needed = new_granule_bytes(*b->segment, b->address, size);
  if (needed == 0) return b;
  // Blocks in magazines may merge into mapped room: before mapping more.
  if (!caches_.empty() && flush_magazines()) {
    b->allocated = false;
    cache(b);
    b = take_free_block(pool, size);  // b's own room at least
    if (!b) out_of_memory(bytes, pool.stream, "no virtual address range is long enough");
    needed = new_granule_bytes(*b->segment, b->address, size);
    if (needed == 0) return b;
  }
  // Memory must be mapped: off the hot path, so the high-water guard looks
  // for the free block and the place in it that need the fewest new
  // granules (PyTorch maps what best fit chose).
  if (config_.release_before_new_peak) b = fewest_new_granules(pool, b, size, needed);
  // The rest of the block goes back to the cache before mapping, so the
  // high-water guard can unmap it instead of growing past the peak.
  split(b, size);
  const std::size_t g = up_.vmm->granularity();
  const std::size_t first = b->address / g * g, last = round_up(b->address + size, g);
  prepare_to_reserve(needed);
  if (reserved() + needed <= limit_ && try_map(*b->segment, first, last)) return b;
  ++stats_.num_alloc_retries;
  release_all_cached();
  needed = unmapped_bytes(*b->segment, first, last);
  if (reserved() + needed <= limit_ && try_map(*b->segment, first, last)) return b;
  // Back to the cache; a neighbour may have become free meanwhile (a
  // pending free completed while the cache was released).
  b->allocated = false;
  cache(b);
  out_of_memory(bytes, pool.stream, "");
}

std::size_t CachingAllocator::Impl::new_granule_bytes(const Segment& s, std::uintptr_t at, std::size_t size) const {
  const std::size_t g = up_.vmm->granularity();
  return unmapped_bytes(s, at / g * g, round_up(at + size, g));
}

Block* CachingAllocator::Impl::fewest_new_granules(Pool& pool, Block* taken, std::size_t size, std::size_t& needed) {
  const std::size_t g = up_.vmm->granularity();
  auto touched = [&](std::uintptr_t at) { return (round_up(at + size, g) - at / g * g) / g; };
  Block* best = taken;
  std::uintptr_t best_at = taken->address;
  std::size_t best_touched = touched(best_at);
  auto consider = [&](Block* b) {
    const std::uintptr_t end = b->address + b->size - size;
    const std::uintptr_t aligned_start = round_up(b->address, g), aligned_end = end / g * g;
    for (std::uintptr_t at : {b->address, end, aligned_start, aligned_end}) {
      if (at < b->address || at > end) continue;
      const std::size_t n = new_granule_bytes(*b->segment, at, size), t = touched(at);
      if (n < needed || (size % g == 0 && n == needed && t < best_touched)) {
        needed = n;
        best_touched = t;
        best = b;
        best_at = at;
      }
    }
  };
  consider(taken);
  for (auto& [base, s] : segments_) {
    if (!s->expandable || s->pool != &pool || s->mapped_bytes == 0) continue;
    for (Block* b = s->first; b; b = b->next)
      if (b->is_free() && b->size >= size && b != taken) consider(b);
  }
  if (best != taken) {
    taken->allocated = false;
    index_free(taken);
    unindex_free(best);
    best->allocated = true;
  }
  return best_at == best->address ? best : carve_at(best, best_at);
}

Block* CachingAllocator::Impl::carve_at(Block* b, std::uintptr_t at) {
  Block* rest = arena_.make();
  rest->address = at;
  rest->size = b->address + b->size - at;
  rest->segment = b->segment;
  rest->prev = b;
  rest->next = b->next;
  rest->allocated = true;
  if (b->next) b->next->prev = rest;
  b->next = rest;
  b->size = at - b->address;
  b->allocated = false;
  index_free(b);
  return rest;
}

void CachingAllocator::Impl::create_range(Pool& pool, std::size_t bytes) {
  const std::size_t g = up_.vmm->granularity();
  // Twice the device: the range can hold the device's worth of memory even
  // after holes were unmapped along the way.
  std::size_t span = std::min(limit_, up_.capacity ? up_.capacity : std::size_t{1} << 40);
  span = round_up(std::max(span, bytes), g) * 2;
  std::uintptr_t base = 0;
  try {
    base = up_.vmm->reserve(span);
  } catch (const OutOfMemoryError&) {
    out_of_memory(bytes, pool.stream, "no virtual address space left for an expandable segment");
  }
  auto segment = std::make_unique<Segment>();
  segment->base = base;
  segment->size = span;
  segment->pool = &pool;
  segment->expandable = true;
  segment->mapped.clear();  // grows as granules are mapped
  Block* b = arena_.make();
  b->address = base;
  b->size = span;
  b->segment = segment.get();
  segment->first = b;
  ++pool.ranges;
  increase(stats_.segment, pool.kind, 1);
  segments_.emplace(base, std::move(segment));
  index_free(b);
}

std::size_t CachingAllocator::Impl::unmapped_bytes(const Segment& s, std::uintptr_t first, std::uintptr_t last) const {
  const std::size_t g = up_.vmm->granularity();
  std::size_t n = 0;
  for (std::uintptr_t a = first; a < last; a += g) n += s.granule_mapped((a - s.base) / g) ? 0 : g;
  return n;
}

bool CachingAllocator::Impl::try_map(Segment& s, std::uintptr_t first, std::uintptr_t last) {
  const std::size_t g = up_.vmm->granularity();
  for (std::uintptr_t a = first; a < last;) {
    if (s.granule_mapped((a - s.base) / g)) {
      a += g;
      continue;
    }
    std::uintptr_t run_end = a;
    while (run_end < last && !s.granule_mapped((run_end - s.base) / g)) run_end += g;
    try {
      up_.vmm->map(a, run_end - a);
    } catch (const OutOfMemoryError&) {
      return false;
    }
    if (s.mapped.size() < (run_end - s.base) / g) s.mapped.resize((run_end - s.base) / g, 0);
    std::fill(s.mapped.begin() + long((a - s.base) / g), s.mapped.begin() + long((run_end - s.base) / g), 1);
    s.mapped_bytes += run_end - a;
    ++stats_.num_device_alloc;
    increase(stats_.reserved_bytes, s.pool->kind, i64(run_end - a));
    note_reserved();
    history_.record(HistoryAction::kSegmentMap, a, run_end - a, run_end - a, s.pool->stream, kNoTag);
    a = run_end;
  }
  return true;
}

std::size_t CachingAllocator::Impl::unmap_range(Segment& s, std::uintptr_t first, std::uintptr_t last) {
  const std::size_t g = up_.vmm->granularity();
  first = std::max(first, s.base);
  last = std::min(last, s.base + s.size);
  if (first >= last || s.mapped_bytes == 0) return 0;
  const std::size_t known = s.mapped.size();
  if ((first - s.base) / g >= known) return 0;
  const auto begin = s.mapped.begin();
  const auto end = begin + long(std::min(known, (last - s.base + g - 1) / g));
  std::size_t total = 0;
  for (auto at = std::find(begin + long((first - s.base) / g), end, std::uint8_t{1}); at != end;
       at = std::find(at, end, std::uint8_t{1})) {
    const auto run_end = std::find(at, end, std::uint8_t{0});
    const std::uintptr_t a = s.base + std::size_t(at - begin) * g;
    const std::uintptr_t bytes = std::size_t(run_end - at) * g;
    up_.vmm->unmap(a, bytes);
    std::fill(at, run_end, std::uint8_t{0});
    s.mapped_bytes -= bytes;
    total += bytes;
    ++stats_.num_device_free;
    decrease(stats_.reserved_bytes, s.pool->kind, i64(bytes));
    history_.record(HistoryAction::kSegmentUnmap, a, bytes, bytes, s.pool->stream, kNoTag);
    at = run_end;
  }
  return total;
}

std::size_t CachingAllocator::Impl::unmap_free_block(Block* b) {
  const std::size_t g = up_.vmm->granularity();
  return unmap_range(*b->segment, round_up(b->address, g), (b->address + b->size) / g * g);
}

}  // namespace gpumem::alloc
