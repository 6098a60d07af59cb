// The paged KV-cache manager: see include/gpumem/serve/kv_block_manager.h.
#include "gpumem/serve/kv_block_manager.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "gpumem/common/error.h"
#include "serve/mix64.h"

namespace gpumem::serve {
namespace {

constexpr uint32_t kNone = KvBlockManager::kNoBlock;

uint64_t table_capacity(uint64_t n) {
  uint64_t c = 16;
  while (c < 2 * n) c <<= 1;
  return c;
}

[[noreturn]] void broken(const std::string& what) { throw std::logic_error("kv block manager: " + what); }

}  // namespace

uint64_t KvBlockManager::chain_hash(uint64_t parent, std::span<const uint32_t> tokens) {
  uint64_t h = mix64(parent ^ 0x9e3779b97f4a7c15ULL);
  for (uint32_t t : tokens) h = (h ^ t) * 0x100000001b3ULL + 0x9e3779b97f4a7c15ULL;
  return mix64(h);
}

KvBlockManager::KvBlockManager(const KvBlockManagerConfig& config) : config_(config) {
  if (config.num_blocks == 0 || config.block_tokens == 0 || config.max_sequences == 0 ||
      config.max_blocks_per_sequence == 0)
    throw InputError("KV-cache manager: blocks, block size, sequences and table size must be positive");
  if (config.num_blocks > (1u << 28) || config.max_sequences > (1u << 24))
    throw InputError("KV-cache manager: over 2^28 blocks or 2^24 sequences");
  if (static_cast<uint64_t>(config.max_sequences) * config.max_blocks_per_sequence > (uint64_t{1} << 30))
    throw InputError("KV-cache manager: sequences x table size over 2^30");
  const uint32_t n = config.num_blocks;
  ref_.assign(n, 0);
  fill_.assign(n, 0);
  prev_.assign(n, kNone);
  next_.assign(n, kNone);
  hash_.assign(n, 0);
  registered_.assign(n, 0);
  tokens_.assign(static_cast<size_t>(n) * config.block_tokens, 0);
  free_list_.resize(n);
  for (uint32_t i = 0; i < n; ++i) free_list_[i] = n - 1 - i;  // block 0 handed out first
  free_count_ = n;
  const uint64_t cc = table_capacity(n);
  cache_keys_.assign(cc, 0);
  cache_vals_.assign(cc, kNone);
  cache_mask_ = cc - 1;
  const uint64_t mc = table_capacity(config.max_sequences);
  map_keys_.assign(mc, 0);
  map_vals_.assign(mc, kNone);
  map_mask_ = mc - 1;
  const uint32_t s = config.max_sequences;
  seq_id_.assign(s, 0);
  seq_tokens_.assign(s, 0);
  seq_computed_.assign(s, 0);
  seq_blocks_.assign(s, 0);
  tables_.assign(static_cast<size_t>(s) * config.max_blocks_per_sequence, kNone);
  free_slots_.resize(s);
  for (uint32_t i = 0; i < s; ++i) free_slots_[i] = s - 1 - i;
  free_slot_count_ = s;
}

// ---- sequence map --------------------------------------------------------

uint32_t KvBlockManager::find_slot(uint64_t id) const {
  for (uint64_t i = mix64(id) & map_mask_;; i = (i + 1) & map_mask_) {
    if (map_vals_[i] == kNone) return kNone;
    if (map_keys_[i] == id) return map_vals_[i];
  }
}

void KvBlockManager::map_insert(uint64_t id, uint32_t slot) {
  uint64_t i = mix64(id) & map_mask_;
  while (map_vals_[i] != kNone) i = (i + 1) & map_mask_;
  map_keys_[i] = id;
  map_vals_[i] = slot;
}

void KvBlockManager::map_erase(uint64_t id) {
  uint64_t i = mix64(id) & map_mask_;
  while (map_keys_[i] != id || map_vals_[i] == kNone) i = (i + 1) & map_mask_;
  // Backward-shift deletion keeps every probe chain unbroken.
  for (uint64_t j = (i + 1) & map_mask_; map_vals_[j] != kNone; j = (j + 1) & map_mask_) {
    const uint64_t home = mix64(map_keys_[j]) & map_mask_;
    if (((j - home) & map_mask_) >= ((j - i) & map_mask_)) {
      map_keys_[i] = map_keys_[j];
      map_vals_[i] = map_vals_[j];
      i = j;
    }
  }
  map_vals_[i] = kNone;
}

// ---- prefix cache --------------------------------------------------------

uint32_t KvBlockManager::cache_find(uint64_t hash, std::span<const uint32_t> tokens) const {
  for (uint64_t i = hash & cache_mask_;; i = (i + 1) & cache_mask_) {
    const uint32_t b = cache_vals_[i];
    if (b == kNone) return kNone;
    // The hash finds the block; the tokens decide: a collision never hits.
    if (cache_keys_[i] == hash && std::memcmp(&tokens_[static_cast<size_t>(b) * config_.block_tokens], tokens.data(),
                                              sizeof(uint32_t) * config_.block_tokens) == 0)
      return b;
  }
}

void KvBlockManager::cache_insert(uint64_t hash, uint32_t block) {
  uint64_t i = hash & cache_mask_;
  while (cache_vals_[i] != kNone) i = (i + 1) & cache_mask_;
  cache_keys_[i] = hash;
  cache_vals_[i] = block;
  registered_[block] = 1;
}

void KvBlockManager::cache_erase(uint32_t block) {
  uint64_t i = hash_[block] & cache_mask_;
  while (cache_vals_[i] != block) i = (i + 1) & cache_mask_;
  for (uint64_t j = (i + 1) & cache_mask_; cache_vals_[j] != kNone; j = (j + 1) & cache_mask_) {
    const uint64_t home = cache_keys_[j] & cache_mask_;
    if (((j - home) & cache_mask_) >= ((j - i) & cache_mask_)) {
      cache_keys_[i] = cache_keys_[j];
      cache_vals_[i] = cache_vals_[j];
      i = j;
    }
  }
  cache_vals_[i] = kNone;
  registered_[block] = 0;
}

// ---- LRU of cached blocks ------------------------------------------------

void KvBlockManager::lru_push_back(uint32_t b) {
  prev_[b] = lru_tail_;
  next_[b] = kNone;
  if (lru_tail_ != kNone)
    next_[lru_tail_] = b;
  else
    lru_head_ = b;
  lru_tail_ = b;
  ++lru_count_;
}

void KvBlockManager::lru_unlink(uint32_t b) {
  if (prev_[b] != kNone)
    next_[prev_[b]] = next_[b];
  else
    lru_head_ = next_[b];
  if (next_[b] != kNone)
    prev_[next_[b]] = prev_[b];
  else
    lru_tail_ = prev_[b];
  prev_[b] = next_[b] = kNone;
  --lru_count_;
}

// ---- blocks --------------------------------------------------------------

uint32_t KvBlockManager::allocate_block() {
  uint32_t b;
  if (free_count_ > 0) {
    b = free_list_[--free_count_];
  } else {
    b = lru_head_;  // callers checked free_blocks() first
    lru_unlink(b);
    cache_erase(b);
    ++stats_.evictions;
  }
  ref_[b] = 1;
  fill_[b] = 0;
  ++stats_.allocations;
  return b;
}

void KvBlockManager::release_block(uint32_t b) {
  if (--ref_[b] > 0) return;
  filled_slots_ -= fill_[b];
  if (registered_[b])
    lru_push_back(b);
  else
    free_list_[free_count_++] = b;
}

void KvBlockManager::take_hit(uint32_t b) {
  if (ref_[b]++ == 0) {
    lru_unlink(b);
    filled_slots_ += fill_[b];
  }
}

// Fills the sequence's blocks with `tokens` from its current end; the blocks
// are already in the table (allocated or copied by the caller).
void KvBlockManager::write_tokens(uint32_t slot, std::span<const uint32_t> tokens) {
  const uint32_t bt = config_.block_tokens;
  uint32_t* t = table(slot);
  uint32_t pos = seq_tokens_[slot];
  size_t k = 0;
  while (k < tokens.size()) {
    const uint32_t index = pos / bt, off = pos % bt;
    const uint32_t b = t[index];
    const auto n = static_cast<uint32_t>(std::min<size_t>(bt - off, tokens.size() - k));
    std::memcpy(&tokens_[static_cast<size_t>(b) * bt + off], tokens.data() + k, n * sizeof(uint32_t));
    fill_[b] += n;
    filled_slots_ += n;
    pos += n;
    k += n;
    seq_tokens_[slot] = pos;
    if (off + n == bt) on_full(slot, index);
  }
}

void KvBlockManager::on_full(uint32_t slot, uint32_t index) {
  const uint32_t* t = table(slot);
  const uint32_t b = t[index];
  const uint64_t parent = index == 0 ? 0 : hash_[t[index - 1]];
  const std::span<const uint32_t> contents = block_contents(b);
  hash_[b] = chain_hash(parent, contents);
  // A block whose contents are cached already (computed twice) stays out of
  // the cache: it goes to the free list when released.
  if ((index + 1) * config_.block_tokens <= seq_computed_[slot]) register_block(b);
}

void KvBlockManager::register_block(uint32_t b) {
  if (config_.prefix_caching && !registered_[b] && cache_find(hash_[b], block_contents(b)) == kNone)
    cache_insert(hash_[b], b);
}

std::span<const uint32_t> KvBlockManager::block_contents(uint32_t block) const {
  return {&tokens_[static_cast<size_t>(block) * config_.block_tokens], fill_[block]};
}

// ---- sequences -----------------------------------------------------------

uint32_t KvBlockManager::walk_hits(std::span<const uint32_t> tokens, uint32_t* hits, uint32_t* revived) const {
  *hits = *revived = 0;
  if (!config_.prefix_caching || tokens.empty()) return 0;
  const uint32_t bt = config_.block_tokens;
  const size_t full = (tokens.size() - 1) / bt;  // the last token is always computed
  uint64_t parent = 0;
  for (size_t i = 0; i < full; ++i) {
    const auto span = tokens.subspan(i * bt, bt);
    const uint64_t h = chain_hash(parent, span);
    const uint32_t b = cache_find(h, span);
    if (b == kNone) break;
    ++*hits;
    if (ref_[b] == 0) ++*revived;
    parent = h;
  }
  return *hits;
}

uint32_t KvBlockManager::admission_cost(std::span<const uint32_t> tokens, uint32_t* cached_tokens) const {
  uint32_t hits, revived;
  walk_hits(tokens, &hits, &revived);
  if (cached_tokens) *cached_tokens = hits * config_.block_tokens;
  return blocks_needed(tokens.size()) - hits + revived;
}

bool KvBlockManager::add_sequence(uint64_t id, std::span<const uint32_t> tokens, uint32_t* cached_tokens,
                                  bool computed) {
  if (cached_tokens) *cached_tokens = 0;
  const uint32_t need = blocks_needed(tokens.size());
  if (free_slot_count_ == 0 || need > config_.max_blocks_per_sequence || find_slot(id) != kNone) return false;
  uint32_t hits, revived;
  walk_hits(tokens, &hits, &revived);
  if (need - hits + revived > free_blocks()) return false;
  const uint32_t slot = free_slots_[--free_slot_count_];
  map_insert(id, slot);
  ++live_sequences_;
  seq_id_[slot] = id;
  uint32_t* t = table(slot);
  const uint32_t bt = config_.block_tokens;
  uint64_t parent = 0;
  // Hits first: they come off the LRU list before anything is evicted.
  for (uint32_t i = 0; i < hits; ++i) {
    const auto span = tokens.subspan(static_cast<size_t>(i) * bt, bt);
    parent = chain_hash(parent, span);
    const uint32_t b = cache_find(parent, span);
    take_hit(b);
    t[i] = b;
  }
  for (uint32_t i = hits; i < need; ++i) t[i] = allocate_block();
  seq_blocks_[slot] = need;
  seq_tokens_[slot] = hits * bt;
  seq_computed_[slot] = computed ? static_cast<uint32_t>(tokens.size()) : hits * bt;
  write_tokens(slot, tokens.subspan(static_cast<size_t>(hits) * bt));
  stats_.prefix_query_tokens += tokens.size();
  stats_.prefix_hit_tokens += static_cast<uint64_t>(hits) * bt;
  if (cached_tokens) *cached_tokens = hits * bt;
  return true;
}

uint32_t KvBlockManager::append_cost(uint64_t id, uint32_t n) const {
  const uint32_t slot = find_slot(id);
  if (slot == kNone || n == 0) return 0;
  const uint32_t m = seq_tokens_[slot];
  uint32_t cost = blocks_needed(static_cast<uint64_t>(m) + n) - seq_blocks_[slot];
  if (m % config_.block_tokens != 0 && ref_[table(slot)[seq_blocks_[slot] - 1]] > 1) ++cost;  // copy-on-write
  return cost;
}

bool KvBlockManager::append_tokens(uint64_t id, std::span<const uint32_t> tokens) {
  const uint32_t slot = find_slot(id);
  if (slot == kNone) return false;
  if (tokens.empty()) return true;
  const uint32_t m = seq_tokens_[slot];
  const uint32_t need = blocks_needed(static_cast<uint64_t>(m) + tokens.size());
  if (need > config_.max_blocks_per_sequence || append_cost(id, static_cast<uint32_t>(tokens.size())) > free_blocks())
    return false;
  uint32_t* t = table(slot);
  const uint32_t bt = config_.block_tokens;
  if (m % bt != 0) {
    const uint32_t last = t[seq_blocks_[slot] - 1];
    if (ref_[last] > 1) {  // copy-on-write: the sharers keep the original
      const uint32_t copy = allocate_block();
      std::memcpy(&tokens_[static_cast<size_t>(copy) * bt], &tokens_[static_cast<size_t>(last) * bt],
                  fill_[last] * sizeof(uint32_t));
      fill_[copy] = fill_[last];
      filled_slots_ += fill_[copy];
      --ref_[last];
      t[seq_blocks_[slot] - 1] = copy;
      ++stats_.cow_copies;
    }
  }
  for (uint32_t i = seq_blocks_[slot]; i < need; ++i) t[i] = allocate_block();
  seq_blocks_[slot] = need;
  // Appended tokens are computed, unless a deferred prompt is still behind.
  if (seq_computed_[slot] == m) seq_computed_[slot] = m + static_cast<uint32_t>(tokens.size());
  write_tokens(slot, tokens);
  return true;
}

bool KvBlockManager::fork(uint64_t parent, uint64_t child) {
  const uint32_t ps = find_slot(parent);
  if (ps == kNone || free_slot_count_ == 0 || find_slot(child) != kNone) return false;
  const uint32_t cs = free_slots_[--free_slot_count_];
  map_insert(child, cs);
  ++live_sequences_;
  seq_id_[cs] = child;
  const uint32_t* pt = table(ps);
  uint32_t* ct = table(cs);
  for (uint32_t i = 0; i < seq_blocks_[ps]; ++i) {
    ct[i] = pt[i];
    ++ref_[pt[i]];
  }
  seq_blocks_[cs] = seq_blocks_[ps];
  seq_tokens_[cs] = seq_tokens_[ps];
  seq_computed_[cs] = seq_computed_[ps];
  return true;
}

bool KvBlockManager::free_sequence(uint64_t id) {
  const uint32_t slot = find_slot(id);
  if (slot == kNone) return false;
  const uint32_t* t = table(slot);
  // Last block first, so that a sequence's tail is evicted before its head.
  for (uint32_t i = seq_blocks_[slot]; i-- > 0;) release_block(t[i]);
  seq_blocks_[slot] = seq_tokens_[slot] = seq_computed_[slot] = 0;
  map_erase(id);
  free_slots_[free_slot_count_++] = slot;
  --live_sequences_;
  return true;
}

bool KvBlockManager::mark_computed(uint64_t id, uint32_t tokens) {
  const uint32_t slot = find_slot(id);
  if (slot == kNone) return false;
  const uint32_t bt = config_.block_tokens;
  const uint32_t n = std::min(tokens, seq_tokens_[slot]);
  if (n <= seq_computed_[slot]) return true;
  const uint32_t* t = table(slot);
  for (uint32_t i = seq_computed_[slot] / bt; (i + 1) * bt <= n; ++i) register_block(t[i]);
  seq_computed_[slot] = n;
  return true;
}

uint32_t KvBlockManager::sequence_tokens(uint64_t id) const {
  const uint32_t slot = find_slot(id);
  return slot == kNone ? 0 : seq_tokens_[slot];
}

std::span<const uint32_t> KvBlockManager::block_table(uint64_t id) const {
  const uint32_t slot = find_slot(id);
  if (slot == kNone) return {};
  return {table(slot), seq_blocks_[slot]};
}

// ---- invariants ----------------------------------------------------------

void KvBlockManager::check_invariants() const {
  const uint32_t n = config_.num_blocks, bt = config_.block_tokens;
  std::vector<uint32_t> refs(n, 0);
  std::vector<uint8_t> on_free(n, 0), on_lru(n, 0);
  uint32_t live = 0;
  std::vector<uint8_t> slot_free(config_.max_sequences, 0);
  for (uint32_t i = 0; i < free_slot_count_; ++i) slot_free[free_slots_[i]] = 1;
  for (uint32_t s = 0; s < config_.max_sequences; ++s) {
    if (slot_free[s]) continue;
    ++live;
    if (find_slot(seq_id_[s]) != s) broken("sequence slot not found by its id");
    const uint32_t* t = table(s);
    if (seq_blocks_[s] != blocks_needed(seq_tokens_[s])) broken("table length does not match the tokens");
    uint64_t parent = 0;
    for (uint32_t i = 0; i < seq_blocks_[s]; ++i) {
      const uint32_t b = t[i];
      if (b >= n) broken("table holds a bad block id");
      ++refs[b];
      const uint32_t expect_fill = std::min(bt, seq_tokens_[s] - i * bt);
      if (fill_[b] != expect_fill) broken("block fill differs from its sequence's token count");
      if (fill_[b] == bt) {
        if (hash_[b] != chain_hash(parent, block_contents(b))) broken("full block's hash is not its chain hash");
        parent = hash_[b];
      }
    }
  }
  if (live != live_sequences_) broken("live sequence count");
  uint64_t filled = 0;
  for (uint32_t b = 0; b < n; ++b) {
    if (refs[b] != ref_[b]) broken("reference count of block " + std::to_string(b) + " differs from the tables");
    if (ref_[b] > 0) filled += fill_[b];
  }
  if (filled != filled_slots_) broken("filled slot count");
  for (uint32_t i = 0; i < free_count_; ++i) {
    const uint32_t b = free_list_[i];
    if (ref_[b] != 0 || on_free[b]++ || registered_[b])
      broken("free list holds a referenced, repeated or cached block");
  }
  uint32_t count = 0, prev = kNone;
  for (uint32_t b = lru_head_; b != kNone; prev = b, b = next_[b]) {
    if (++count > n) broken("LRU list loops");
    if (prev_[b] != prev) broken("LRU back link");
    if (ref_[b] != 0 || on_lru[b]++ || on_free[b] || !registered_[b] || fill_[b] != bt)
      broken("LRU holds a referenced, repeated, uncached or partial block");
  }
  if (prev != lru_tail_ || count != lru_count_) broken("LRU tail or count");
  for (uint32_t b = 0; b < n; ++b)
    if (ref_[b] == 0 && !on_free[b] && !on_lru[b]) broken("block " + std::to_string(b) + " leaked");
  uint32_t cached = 0;
  for (uint64_t i = 0; i <= cache_mask_; ++i) {
    const uint32_t b = cache_vals_[i];
    if (b == kNone) continue;
    ++cached;
    if (!registered_[b] || cache_keys_[i] != hash_[b] || fill_[b] != bt) broken("prefix cache entry is stale");
    if (cache_find(hash_[b], block_contents(b)) != b) broken("prefix cache entry unreachable");
  }
  uint32_t reg = 0;
  for (uint32_t b = 0; b < n; ++b) reg += registered_[b];
  if (reg != cached) broken("registered blocks differ from cache entries");
}

}  // namespace gpumem::serve
