#pragma once
// The paged KV-cache manager (issue 14): a pool of fixed-size blocks, one
// block table per sequence, reference counts with copy-on-write, and a prefix
// cache of full blocks found by a hash chained over each block's tokens and
// its parent's hash (vLLM's design).
//
// A block is in exactly one of three states:
//   referenced  ref_count > 0, in one or more block tables;
//   cached      ref_count == 0, full and registered in the prefix cache, on
//               the LRU list (reusable by a prefix hit, or evicted, least
//               recently freed first, when a block is needed and no clean
//               block is left);
//   clean       ref_count == 0, on the free list (never used, or not cached).
// free_blocks() counts cached + clean: both can be handed out.
//
// Every array (blocks, free list, LRU links, prefix hash table, sequence map,
// block tables) is sized in the constructor; no operation allocates. Each
// operation costs O(blocks touched) (plus O(tokens) hashing for full blocks).
// Not thread-safe.
#include <cstdint>
#include <span>
#include <vector>

namespace gpumem::serve {

struct KvBlockManagerConfig {
  uint32_t num_blocks = 0;
  uint32_t block_tokens = 16;
  uint32_t max_sequences = 256;            // sequences held at once (forks included)
  uint32_t max_blocks_per_sequence = 256;  // a block table's capacity
  bool prefix_caching = true;
};

struct KvBlockStats {
  uint64_t prefix_query_tokens = 0;  // tokens of add_sequence calls
  uint64_t prefix_hit_tokens = 0;    // of those, found in the prefix cache
  uint64_t cow_copies = 0;           // shared partly-filled blocks copied before an append
  uint64_t evictions = 0;            // cached blocks reused for other contents
  uint64_t allocations = 0;          // blocks handed out (fresh, evicted or copied into)
};

class KvBlockManager {
 public:
  static constexpr uint32_t kNoBlock = UINT32_MAX;

  // InputError when a size is zero or the pool is over 2^28 blocks.
  explicit KvBlockManager(const KvBlockManagerConfig& config);

  const KvBlockManagerConfig& config() const { return config_; }
  uint32_t blocks_needed(uint64_t tokens) const {
    return static_cast<uint32_t>((tokens + config_.block_tokens - 1) / config_.block_tokens);
  }

  // Free blocks add_sequence(tokens) would take: new blocks plus cached blocks
  // a prefix hit takes off the LRU list. Read-only.
  uint32_t admission_cost(std::span<const uint32_t> tokens, uint32_t* cached_tokens = nullptr) const;
  // A new sequence holding `tokens`. Full blocks are looked up in the prefix
  // cache in order up to the first miss; at most tokens.size() - 1 tokens hit
  // (the last token is always computed, for its logits). *cached_tokens gets
  // the hit tokens. False, and nothing changes, when the id is taken, the
  // sequence slots or the table are full, or the blocks run out.
  // computed = false defers caching: the tokens hold slots, but their full
  // blocks join the prefix cache only as mark_computed() reaches them (a
  // prompt prefilled in chunks, whose KV a preemption may throw away first).
  bool add_sequence(uint64_t id, std::span<const uint32_t> tokens, uint32_t* cached_tokens = nullptr,
                    bool computed = true);
  // The sequence's first `tokens` tokens have KV: its full blocks up to
  // there join the prefix cache. False when there is no such sequence.
  bool mark_computed(uint64_t id, uint32_t tokens);
  // Free blocks append_tokens(id, n tokens) would take (copy-on-write included).
  uint32_t append_cost(uint64_t id, uint32_t n) const;
  // Appends tokens (computed ones, when the sequence is computed up to its
  // end); a shared, partly-filled last block is copied first. False,
  // and nothing changes, when the blocks run out or the table is full.
  bool append_tokens(uint64_t id, std::span<const uint32_t> tokens);
  // The child shares every block of the parent (beam search, parallel
  // sampling). False when the parent is missing, the child exists or the
  // sequence slots are full.
  bool fork(uint64_t parent, uint64_t child);
  // Drops the sequence's references; full registered blocks become cached.
  // False when there is no such sequence.
  bool free_sequence(uint64_t id);

  bool has_sequence(uint64_t id) const { return find_slot(id) != kNoBlock; }
  uint32_t sequence_tokens(uint64_t id) const;                     // 0 when absent
  std::span<const uint32_t> block_table(uint64_t id) const;        // empty when absent
  std::span<const uint32_t> block_contents(uint32_t block) const;  // the tokens it holds
  uint32_t ref_count(uint32_t block) const { return ref_[block]; }
  uint32_t sequences() const { return live_sequences_; }

  uint32_t num_blocks() const { return config_.num_blocks; }
  uint32_t free_blocks() const { return free_count_ + lru_count_; }  // clean + cached
  uint32_t cached_blocks() const { return lru_count_; }
  uint32_t used_blocks() const { return config_.num_blocks - free_blocks(); }
  uint64_t filled_slots() const { return filled_slots_; }  // tokens in referenced blocks, each block once
  const KvBlockStats& stats() const { return stats_; }

  // Rebuilds every count from the block tables and checks the free list, the
  // LRU list and the hash table against them. Throws std::logic_error naming
  // the first broken invariant. O(pool + tables); for tests.
  void check_invariants() const;

  // The chained hash of a full block: its parent's hash (0 for the first
  // block) and its tokens.
  static uint64_t chain_hash(uint64_t parent, std::span<const uint32_t> tokens);

 private:
  uint32_t find_slot(uint64_t id) const;
  void map_insert(uint64_t id, uint32_t slot);
  void map_erase(uint64_t id);
  uint32_t cache_find(uint64_t hash, std::span<const uint32_t> tokens) const;
  void cache_insert(uint64_t hash, uint32_t block);
  void cache_erase(uint32_t block);
  void lru_push_back(uint32_t block);
  void lru_unlink(uint32_t block);
  uint32_t allocate_block();
  void release_block(uint32_t block);
  void take_hit(uint32_t block);
  void write_tokens(uint32_t slot, std::span<const uint32_t> tokens);
  void on_full(uint32_t slot, uint32_t index);
  void register_block(uint32_t block);
  uint32_t* table(uint32_t slot) { return &tables_[static_cast<size_t>(slot) * config_.max_blocks_per_sequence]; }
  const uint32_t* table(uint32_t slot) const {
    return &tables_[static_cast<size_t>(slot) * config_.max_blocks_per_sequence];
  }
  uint32_t walk_hits(std::span<const uint32_t> tokens, uint32_t* hits, uint32_t* revived) const;

  KvBlockManagerConfig config_;
  KvBlockStats stats_;
  // Per block.
  std::vector<uint32_t> ref_, fill_, prev_, next_;
  std::vector<uint64_t> hash_;
  std::vector<uint8_t> registered_;
  std::vector<uint32_t> tokens_;  // num_blocks x block_tokens: what each block holds
  // Clean blocks (a stack) and cached blocks (LRU, head = least recent).
  std::vector<uint32_t> free_list_;
  uint32_t free_count_ = 0, lru_head_ = kNoBlock, lru_tail_ = kNoBlock, lru_count_ = 0;
  // Prefix cache: open addressing, linear probing, hash -> block.
  std::vector<uint64_t> cache_keys_;
  std::vector<uint32_t> cache_vals_;
  uint64_t cache_mask_ = 0;
  // Sequences: id -> slot (open addressing), per-slot state and tables.
  std::vector<uint64_t> map_keys_;
  std::vector<uint32_t> map_vals_;
  uint64_t map_mask_ = 0;
  std::vector<uint64_t> seq_id_;
  std::vector<uint32_t> seq_tokens_, seq_computed_, seq_blocks_, free_slots_, tables_;
  uint32_t free_slot_count_ = 0, live_sequences_ = 0;
  uint64_t filled_slots_ = 0;
};

}  // namespace gpumem::serve
