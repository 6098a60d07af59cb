// Growing and shrinking the cache: segment sizes under the high-water
// guard, new segments, giving cached memory back, and frees that complete
// once other streams' work is done.
#include "alloc/caching_allocator_impl.h"

namespace gpumem::alloc {

void CachingAllocator::Impl::process_events(bool wait) {
  if (wait && !pending_.empty()) ++stats_.num_sync_all_streams;
  std::size_t kept = 0;
  for (PendingFree& p : pending_) {
    if (wait) up_.events->synchronize(p.event);
    if (!wait && !up_.events->query(p.event)) {
      pending_[kept++] = p;
      continue;
    }
    up_.events->destroy(p.event);
    if (--p.block->pending_events == 0) free_block(p.block);
  }
  pending_.resize(kept);
}

std::size_t CachingAllocator::Impl::segment_size(std::size_t size, PoolKind kind) const {
  if (kind == PoolKind::kSmall) return config_.small_segment;
  const std::size_t exact = round_up(size, config_.large_round);
  if (config_.large_segment && size < config_.min_large_alloc) {
    // A roomy segment lets later requests share it. Under the high-water
    // guard it is taken only when it does not raise the peak, or when an
    // exact segment would waste over a quarter of the request in rounding
    // (the remainder of a large block under 1 MiB serves no one).
    const std::size_t roomy = std::max(config_.large_segment, size);
    if (!config_.release_before_new_peak || reserved() + roomy <= high_water_ || (exact - size) * 4 > size)
      return roomy;
    // An exact segment whose tail is too short to split off is waste
    // for as long as it lives. When this size needed new segments three
    // times before (tensors of one shape come in numbers: ViT-B/16's
    // weights, gradients and AdamW states of 9 MiB are 96), a segment
    // for two wastes less per request. On the real traces this takes
    // ViT-B/16 from 1,356 to 1,298 MiB, under PyTorch's 1,326; fewer
    // growths before pairing cost more on resnet50 inference than they
    // save elsewhere (measured with bench/default_vs_pytorch.sh).
    const std::size_t tail = exact - size;
    if (tail > 0 && tail <= config_.large_split_remainder && growths(size) >= kGrowthsBeforePairs) {
      const std::size_t pair = round_up(2 * size, config_.large_round);
      if (pair - 2 * size < 2 * tail) return pair;
    }
  }
  return exact;
}

Block* CachingAllocator::Impl::grow(Pool& pool, std::size_t size, std::size_t bytes) {
  const std::size_t wanted = segment_size(size, pool.kind);
  if (pool.kind == PoolKind::kLarge) count_growth(size);
  // When a roomy segment does not fit, one just big enough may.
  const std::size_t least = pool.kind == PoolKind::kSmall ? wanted : round_up(size, config_.large_round);
  prepare_to_reserve(wanted);
  if (Block* b = try_new_segment(pool, wanted)) return b;
  if (least < wanted && config_.release_before_new_peak)
    if (Block* b = try_new_segment(pool, least)) return b;
  ++stats_.num_alloc_retries;
  release_all_cached();
  if (Block* b = try_new_segment(pool, wanted)) return b;
  if (least < wanted && config_.release_before_new_peak)
    if (Block* b = try_new_segment(pool, least)) return b;
  out_of_memory(bytes, pool.stream, "");
}

void CachingAllocator::Impl::prepare_to_reserve(std::size_t more) {
  if (config_.garbage_collection_threshold > 0 && up_.capacity) {
    auto threshold = static_cast<std::size_t>(config_.garbage_collection_threshold * double(up_.capacity));
    if (reserved() + more > threshold) release_cached(threshold > more ? threshold - more : 0, /*oldest=*/true);
  }
  if (config_.release_before_new_peak && reserved() + more > high_water_)
    release_cached(high_water_ > more ? high_water_ - more : 0, /*oldest=*/false);
}

Block* CachingAllocator::Impl::try_new_segment(Pool& pool, std::size_t bytes) {
  if (reserved() + bytes > limit_) return nullptr;
  void* p = nullptr;
  try {
    p = up_.memory->allocate(bytes, pool.stream);
  } catch (const OutOfMemoryError&) {
    return nullptr;
  }
  ++stats_.num_device_alloc;
  auto segment = std::make_unique<Segment>();
  segment->base = reinterpret_cast<std::uintptr_t>(p);
  segment->size = bytes;
  segment->pool = &pool;
  Block* b = arena_.make();
  b->address = segment->base;
  b->size = bytes;
  b->segment = segment.get();
  b->allocated = true;
  segment->first = b;
  increase(stats_.segment, pool.kind, 1);
  increase(stats_.reserved_bytes, pool.kind, i64(bytes));
  if (bytes >= config_.max_split_size) stats_.oversize_segments.increase(1);
  note_reserved();
  history_.record(HistoryAction::kSegmentAlloc, segment->base, bytes, bytes, pool.stream, kNoTag);
  segments_.emplace(segment->base, std::move(segment));
  return b;
}

void CachingAllocator::Impl::release_segment(Segment* s) {
  Block* b = s->first;
  unindex_free(b);
  const PoolKind kind = s->pool->kind;
  up_.memory->deallocate(reinterpret_cast<void*>(s->base), s->size, s->pool->stream);
  ++stats_.num_device_free;
  decrease(stats_.segment, kind, 1);
  decrease(stats_.reserved_bytes, kind, i64(s->size));
  if (s->size >= config_.max_split_size) stats_.oversize_segments.decrease(1);
  history_.record(HistoryAction::kSegmentFree, s->base, s->size, s->size, s->pool->stream, kNoTag);
  arena_.recycle(b);
  segments_.erase(s->base);
}

void CachingAllocator::Impl::release_cached(std::size_t target, bool oldest) {
  std::vector<Block*> candidates;
  for (auto& [base, s] : segments_) {
    if (!s->expandable) {
      if (s->first->is_free() && s->first->next == nullptr) candidates.push_back(s->first);
      continue;
    }
    for (Block* b = s->first; b; b = b->next)
      if (b->is_free()) candidates.push_back(b);
  }
  if (oldest)
    std::sort(candidates.begin(), candidates.end(), [](Block* a, Block* b) { return a->freed_at < b->freed_at; });
  else
    std::sort(candidates.begin(), candidates.end(), [](Block* a, Block* b) { return a->size > b->size; });
  for (Block* b : candidates) {
    if (reserved() <= target) break;
    if (b->segment->expandable)
      unmap_free_block(b);
    else
      release_segment(b->segment);
  }
}

void CachingAllocator::Impl::release_all_cached() {
  flush_magazines();
  process_events(/*wait=*/true);
  release_cached(0, /*oldest=*/false);
  // Ranges with nothing left in them go back too.
  std::vector<Segment*> empty;
  for (auto& [base, s] : segments_)
    if (s->expandable && s->first->is_free() && s->first->next == nullptr) empty.push_back(s.get());
  for (Segment* s : empty) {
    unmap_range(*s, s->base, s->base + s->size);
    unindex_free(s->first);
    up_.vmm->release(s->base, s->size);
    decrease(stats_.segment, s->pool->kind, 1);
    --s->pool->ranges;
    arena_.recycle(s->first);
    segments_.erase(s->base);
  }
}

}  // namespace gpumem::alloc
