// The paged KV-cache manager: exact cases (copy-on-write, prefix hits, LRU
// eviction, refusals that change nothing) and property tests over millions
// of random operations against a model that knows only each sequence's
// tokens: every sequence's blocks must read back its tokens (so a prefix hit
// never returns a block whose tokens differ, and copy-on-write leaves the
// sharers' prefixes intact), the counts must agree with the tables, and
// every block must come back when all sequences end.
#include <atomic>
#include <cstdlib>
#include <map>
#include <new>
#include <random>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "gpumem/common/error.h"
#include "gpumem/serve/kv_block_manager.h"

// Counts every heap allocation of this test binary, so that a test can
// show the manager's operations make none.
namespace {
std::atomic<uint64_t> g_allocations{0};
}
// Every replaceable form, so that no allocation comes from one allocator and
// goes back to another (std::stable_sort's buffer is new(nothrow); under
// ASan a form left out is ASan's and a mismatch).
namespace {
void* counted_malloc(std::size_t n) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void* counted_aligned(std::size_t n, std::align_val_t a) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  const auto align = static_cast<std::size_t>(a);
  return std::aligned_alloc(align, (std::max<std::size_t>(n, 1) + align - 1) / align * align);
}
}  // namespace
void* operator new(std::size_t n) {
  if (void* p = counted_malloc(n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  if (void* p = counted_malloc(n)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted_malloc(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted_malloc(n); }
void* operator new(std::size_t n, std::align_val_t a) {
  if (void* p = counted_aligned(n, a)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) {
  if (void* p = counted_aligned(n, a)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept { return counted_aligned(n, a); }
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_aligned(n, a);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }

namespace gpumem::serve {
namespace {

std::vector<uint32_t> contents(const KvBlockManager& m, uint64_t id) {
  std::vector<uint32_t> out;
  for (uint32_t b : m.block_table(id)) {
    const auto c = m.block_contents(b);
    out.insert(out.end(), c.begin(), c.end());
  }
  return out;
}

std::vector<uint32_t> iota(uint32_t n, uint32_t from) {
  std::vector<uint32_t> v(n);
  for (uint32_t i = 0; i < n; ++i) v[i] = from + i;
  return v;
}

KvBlockManagerConfig small(uint32_t blocks, uint32_t bt = 16) {
  KvBlockManagerConfig c;
  c.num_blocks = blocks;
  c.block_tokens = bt;
  c.max_sequences = 16;
  c.max_blocks_per_sequence = 16;
  return c;
}

TEST(KvBlockManager, RejectsEmptyPools) {
  EXPECT_THROW(KvBlockManager(small(0)), InputError);
  EXPECT_THROW(KvBlockManager(small(4, 0)), InputError);
}

TEST(KvBlockManager, AddAppendFreeReturnsEveryBlock) {
  KvBlockManager m(small(8));
  const auto t = iota(20, 1);
  uint32_t cached = 99;
  ASSERT_TRUE(m.add_sequence(1, t, &cached));
  EXPECT_EQ(cached, 0u);
  EXPECT_EQ(m.block_table(1).size(), 2u);
  EXPECT_EQ(m.free_blocks(), 6u);
  EXPECT_EQ(m.filled_slots(), 20u);
  const auto more = iota(13, 100);
  ASSERT_TRUE(m.append_tokens(1, more));  // 33 tokens: 3 blocks
  EXPECT_EQ(m.block_table(1).size(), 3u);
  auto expect = t;
  expect.insert(expect.end(), more.begin(), more.end());
  EXPECT_EQ(contents(m, 1), expect);
  m.check_invariants();
  EXPECT_TRUE(m.free_sequence(1));
  EXPECT_FALSE(m.free_sequence(1));
  EXPECT_EQ(m.free_blocks(), 8u);
  EXPECT_EQ(m.cached_blocks(), 2u);  // the two full blocks stay cached
  EXPECT_EQ(m.filled_slots(), 0u);
  m.check_invariants();
}

TEST(KvBlockManager, CopyOnWriteLeavesTheSharedPrefixIntact) {
  KvBlockManager m(small(8));
  const auto t = iota(20, 1);
  ASSERT_TRUE(m.add_sequence(1, t));
  ASSERT_TRUE(m.fork(1, 2));
  EXPECT_FALSE(m.fork(1, 2));  // the child exists
  EXPECT_EQ(m.block_table(2)[0], m.block_table(1)[0]);
  EXPECT_EQ(m.ref_count(m.block_table(1)[1]), 2u);
  EXPECT_EQ(m.append_cost(2, 1), 1u);  // the shared last block is copied first
  const uint32_t token = 777;
  ASSERT_TRUE(m.append_tokens(2, std::span<const uint32_t>(&token, 1)));
  EXPECT_EQ(m.stats().cow_copies, 1u);
  EXPECT_EQ(contents(m, 1), t);  // the parent is untouched
  auto child = t;
  child.push_back(777);
  EXPECT_EQ(contents(m, 2), child);
  EXPECT_EQ(m.block_table(2)[0], m.block_table(1)[0]);  // the full block is still shared
  EXPECT_NE(m.block_table(2)[1], m.block_table(1)[1]);
  EXPECT_EQ(m.ref_count(m.block_table(1)[0]), 2u);
  EXPECT_EQ(m.ref_count(m.block_table(1)[1]), 1u);
  // The parent now owns its last block alone: no copy.
  ASSERT_TRUE(m.append_tokens(1, std::span<const uint32_t>(&token, 1)));
  EXPECT_EQ(m.stats().cow_copies, 1u);
  m.check_invariants();
  m.free_sequence(1);
  m.free_sequence(2);
  EXPECT_EQ(m.free_blocks(), 8u);
  m.check_invariants();
}

TEST(KvBlockManager, PrefixCacheFindsFullBlocksByChainedHash) {
  KvBlockManager m(small(8));
  auto a = iota(40, 1);  // blocks [1..16], [17..32], 8 tokens
  ASSERT_TRUE(m.add_sequence(1, a));
  auto b = iota(36, 1);
  b[33] = 999;  // same two full blocks, a different tail
  uint32_t cached = 0;
  EXPECT_EQ(m.admission_cost(b, &cached), 1u);  // the tail block only
  EXPECT_EQ(cached, 32u);
  ASSERT_TRUE(m.add_sequence(2, b, &cached));
  EXPECT_EQ(cached, 32u);
  EXPECT_EQ(m.block_table(2)[0], m.block_table(1)[0]);
  EXPECT_EQ(m.block_table(2)[1], m.block_table(1)[1]);
  EXPECT_EQ(m.stats().prefix_hit_tokens, 32u);
  EXPECT_EQ(m.stats().prefix_query_tokens, 76u);
  // The same second block after a different first block: the chain differs.
  auto c = iota(33, 1);
  c[0] = 500;
  EXPECT_EQ(m.admission_cost(c, &cached), 3u);
  EXPECT_EQ(cached, 0u);
  // A prompt that is all cached still computes its last token.
  const auto d = iota(32, 1);
  m.admission_cost(d, &cached);
  EXPECT_EQ(cached, 16u);
  m.check_invariants();
}

TEST(KvBlockManager, CachedBlocksAreRevivedThenEvictedLeastRecentFirst) {
  KvBlockManager m(small(4, 4));
  ASSERT_TRUE(m.add_sequence(1, iota(8, 1)));    // blocks x, y full
  ASSERT_TRUE(m.add_sequence(2, iota(8, 100)));  // two more full
  m.free_sequence(1);                            // cached, least recent
  m.free_sequence(2);
  EXPECT_EQ(m.cached_blocks(), 4u);
  EXPECT_EQ(m.free_blocks(), 4u);
  // A hit revives sequence 2's first block; the miss evicts sequence 1's
  // blocks (freed first; within a sequence its tail goes first).
  uint32_t cached = 0;
  auto t = iota(8, 100);
  t[7] = 5;
  ASSERT_TRUE(m.add_sequence(3, t, &cached));
  EXPECT_EQ(cached, 4u);
  EXPECT_EQ(m.stats().evictions, 1u);
  m.check_invariants();
  EXPECT_EQ(m.admission_cost(iota(8, 1), &cached), 2u);  // its second block is gone, the first still cached
  EXPECT_EQ(cached, 4u);
  // Sequence 1's head came back (a hit), so 100.. second block is evicted next.
  ASSERT_TRUE(m.add_sequence(4, iota(5, 1), &cached));
  EXPECT_EQ(cached, 4u);
  EXPECT_EQ(m.free_blocks(), 0u);
  m.check_invariants();
}

TEST(KvBlockManager, DeferredPromptsJoinTheCacheAsTheyAreComputed) {
  KvBlockManager m(small(8, 4));
  const auto t = iota(14, 1);  // three full blocks and a partial one
  ASSERT_TRUE(m.add_sequence(1, t, nullptr, /*computed=*/false));
  uint32_t cached = 0;
  m.admission_cost(t, &cached);
  EXPECT_EQ(cached, 0u);  // nothing computed, nothing to hit
  ASSERT_TRUE(m.mark_computed(1, 9));
  m.admission_cost(t, &cached);
  EXPECT_EQ(cached, 8u);  // the two blocks below token 9
  m.check_invariants();
  // Freed before the rest is computed (a preemption): its third block is
  // not cached, so a re-admission recomputes from token 8.
  ASSERT_TRUE(m.free_sequence(1));
  EXPECT_EQ(m.cached_blocks(), 2u);
  ASSERT_TRUE(m.add_sequence(1, t, &cached, /*computed=*/false));
  EXPECT_EQ(cached, 8u);
  ASSERT_TRUE(m.mark_computed(1, 14));
  const uint32_t token = 5;
  ASSERT_TRUE(m.append_tokens(1, std::span<const uint32_t>(&token, 1)));  // computed: the 4th block fills
  ASSERT_TRUE(m.append_tokens(1, std::span<const uint32_t>(&token, 1)));
  ASSERT_TRUE(m.free_sequence(1));
  EXPECT_EQ(m.cached_blocks(), 4u);
  EXPECT_FALSE(m.mark_computed(1, 3));
  m.check_invariants();
}

TEST(KvBlockManager, RefusalsChangeNothing) {
  KvBlockManager m(small(3, 4));
  ASSERT_TRUE(m.add_sequence(1, iota(10, 1)));  // 3 blocks, all of them
  EXPECT_FALSE(m.add_sequence(2, iota(1, 50)));
  EXPECT_FALSE(m.add_sequence(1, iota(1, 50)));  // the id is taken
  const auto more = iota(3, 60);
  EXPECT_FALSE(m.append_tokens(1, more));  // 13 tokens need a 4th block
  EXPECT_EQ(m.sequence_tokens(1), 10u);
  EXPECT_EQ(contents(m, 1), iota(10, 1));
  ASSERT_TRUE(m.append_tokens(1, iota(2, 60)));  // 12 fit
  ASSERT_TRUE(m.fork(1, 2));
  EXPECT_FALSE(m.append_tokens(2, iota(1, 70)));  // no block for the new one
  m.check_invariants();
  KvBlockManagerConfig c = small(64, 4);
  c.max_blocks_per_sequence = 2;
  KvBlockManager n(c);
  EXPECT_FALSE(n.add_sequence(1, iota(9, 1)));  // the table holds 8 tokens
  EXPECT_EQ(n.free_blocks(), 64u);
}

TEST(KvBlockManager, OperationsAllocateNothingAfterConstruction) {
  KvBlockManager m(small(64, 4));
  std::vector<uint32_t> prompt = iota(42, 1);  // ten full blocks and a partial one
  const uint32_t token = 9;
  uint32_t cached = 0;
  const uint64_t before = g_allocations.load();
  for (uint64_t i = 0; i < 20000; ++i) {
    prompt[41] = static_cast<uint32_t>(i);  // the full blocks hit, the partial one is new
    ASSERT_TRUE(m.add_sequence(i, prompt, &cached));
    ASSERT_TRUE(m.fork(i, i + 1'000'000));
    ASSERT_TRUE(m.append_tokens(i + 1'000'000, std::span<const uint32_t>(&token, 1)));
    ASSERT_TRUE(m.append_tokens(i, std::span<const uint32_t>(&token, 1)));
    ASSERT_TRUE(m.free_sequence(i + 1'000'000));
    ASSERT_TRUE(m.free_sequence(i));
  }
  EXPECT_EQ(g_allocations.load() - before, 0u);
  EXPECT_EQ(cached, 40u);
  EXPECT_EQ(m.stats().cow_copies, 20000u);  // the child's append copied the shared partial block
}

// Random add / append / fork / free against a model of each sequence's tokens.
void random_operations(uint64_t seed, uint32_t ops, uint32_t blocks, uint32_t bt, bool prefix_caching) {
  KvBlockManagerConfig c;
  c.num_blocks = blocks;
  c.block_tokens = bt;
  c.max_sequences = 24;
  c.max_blocks_per_sequence = 12;
  c.prefix_caching = prefix_caching;
  KvBlockManager m(c);
  std::mt19937_64 rng(seed);
  std::map<uint64_t, std::vector<uint32_t>> model;
  std::vector<uint64_t> ids;
  uint64_t next_id = 1;
  // A few families of prompts so that prefixes repeat; token values from a
  // small alphabet so that blocks of different chains share tokens.
  std::vector<std::vector<uint32_t>> families(6);
  for (auto& f : families) {
    f.resize(c.max_blocks_per_sequence * bt);
    for (auto& t : f) t = static_cast<uint32_t>(rng() % 4);
  }
  auto verify = [&](uint64_t id) {
    const auto& want = model.at(id);
    ASSERT_EQ(m.sequence_tokens(id), want.size());
    ASSERT_EQ(contents(m, id), want) << "sequence " << id << " reads back other tokens";
  };
  uint64_t hits = 0;
  for (uint32_t op = 0; op < ops; ++op) {
    const uint32_t kind = static_cast<uint32_t>(rng() % 10);
    if (kind < 3 || ids.empty()) {  // add
      const auto& f = families[rng() % families.size()];
      const uint32_t len = 1 + static_cast<uint32_t>(rng() % (c.max_blocks_per_sequence * bt));
      std::vector<uint32_t> t(f.begin(), f.begin() + len);
      const uint32_t diverge = static_cast<uint32_t>(rng() % (len + 1));
      for (uint32_t i = diverge; i < len; ++i) t[i] = static_cast<uint32_t>(rng() % 4);
      const uint64_t id = next_id++;
      uint32_t expect_cached = 0;
      const uint32_t cost = m.admission_cost(t, &expect_cached);
      const uint32_t free_before = m.free_blocks();
      const bool fits = cost <= free_before && m.sequences() < c.max_sequences;
      uint32_t cached = 0;
      const bool deferred = rng() % 4 == 0;
      ASSERT_EQ(m.add_sequence(id, t, &cached, !deferred), fits);
      if (!fits) {
        ASSERT_EQ(m.free_blocks(), free_before);
        continue;
      }
      ASSERT_EQ(cached, expect_cached);
      ASSERT_EQ(m.free_blocks(), free_before - cost);
      hits += cached;
      model[id] = t;
      ids.push_back(id);
      verify(id);
    } else if (kind == 9 && op % 2 == 0) {  // a deferred prompt computed further
      const uint64_t id = ids[rng() % ids.size()];
      ASSERT_TRUE(m.mark_computed(id, static_cast<uint32_t>(rng() % (model[id].size() + 1))));
    } else if (kind < 7) {  // append
      const uint64_t id = ids[rng() % ids.size()];
      auto& want = model[id];
      const uint32_t n = 1 + static_cast<uint32_t>(rng() % (2 * bt));
      std::vector<uint32_t> t(n);
      for (auto& x : t) x = static_cast<uint32_t>(rng() % 4);
      const uint32_t cost = m.append_cost(id, n);
      const uint32_t free_before = m.free_blocks();
      const bool fits = cost <= free_before && m.blocks_needed(want.size() + n) <= c.max_blocks_per_sequence;
      ASSERT_EQ(m.append_tokens(id, t), fits);
      if (fits) {
        ASSERT_EQ(m.free_blocks(), free_before - cost);
        want.insert(want.end(), t.begin(), t.end());
      } else {
        ASSERT_EQ(m.free_blocks(), free_before);
      }
      verify(id);
    } else if (kind < 8) {  // fork
      const uint64_t parent = ids[rng() % ids.size()];
      const uint64_t child = next_id++;
      const bool fits = m.sequences() < c.max_sequences;
      ASSERT_EQ(m.fork(parent, child), fits);
      if (fits) {
        model[child] = model[parent];
        ids.push_back(child);
        verify(child);
      }
    } else {  // free
      const size_t k = rng() % ids.size();
      ASSERT_TRUE(m.free_sequence(ids[k]));
      model.erase(ids[k]);
      ids[k] = ids.back();
      ids.pop_back();
    }
    if (op % 512 == 0) {
      for (uint64_t id : ids) verify(id);
      try {
        m.check_invariants();
      } catch (const std::exception& e) {
        FAIL() << "op " << op << ": " << e.what();
      }
    }
  }
  for (uint64_t id : ids) verify(id);
  m.check_invariants();
  for (uint64_t id : ids) ASSERT_TRUE(m.free_sequence(id));
  EXPECT_EQ(m.free_blocks(), blocks);
  EXPECT_EQ(m.used_blocks(), 0u);
  EXPECT_EQ(m.filled_slots(), 0u);
  for (uint32_t b = 0; b < blocks; ++b) ASSERT_EQ(m.ref_count(b), 0u);
  m.check_invariants();
  if (prefix_caching) {
    EXPECT_GT(hits, 0u);  // the workload exercises the cache
    EXPECT_GT(m.stats().evictions, 0u);
  } else {
    EXPECT_EQ(m.cached_blocks(), 0u);
  }
  EXPECT_GT(m.stats().cow_copies, 0u);
}

TEST(KvBlockManagerProperty, MillionRandomOperationsBlocksOf4) { random_operations(1, 1'000'000, 96, 4, true); }
TEST(KvBlockManagerProperty, MillionRandomOperationsBlocksOf16) { random_operations(2, 1'000'000, 64, 16, true); }
TEST(KvBlockManagerProperty, RandomOperationsWithoutPrefixCaching) { random_operations(3, 500'000, 64, 8, false); }

}  // namespace
}  // namespace gpumem::serve
