#pragma once
// A pool's free blocks, searchable by best fit (the smallest block at least
// as large as the request).
//
// Block sizes are multiples of 512 bytes, so blocks up to 2 MiB fall in 4096
// exact-size bins: a two-level bitmap finds the first non-empty bin at or
// above the request in a few instructions, and each bin is an intrusive
// list (most recently freed first), so neither insert nor erase allocates.
// Larger blocks, rarer and more varied, live in an ordered set (size, then
// address). Both halves return the smallest fitting size: best fit, O(1) for
// the bins and O(log n) for the set.
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <set>
#include <vector>

#include "alloc/blocks.h"

namespace gpumem::alloc::detail {

// Memory for the ordered set's nodes, which all have one size: a free list
// over chunks, so insert and erase cost a pointer swap instead of a search
// (std::pmr's pool resources look up the right pool on every call).
class NodePool final : public std::pmr::memory_resource {
 public:
  NodePool() = default;
  NodePool(const NodePool&) = delete;
  NodePool& operator=(const NodePool&) = delete;
  ~NodePool() override {
    for (void* chunk : chunks_) ::operator delete(chunk);
  }

 private:
  static constexpr std::size_t kPerChunk = 256;

  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    if (node_size_ == 0) node_size_ = std::max(bytes, sizeof(void*));
    if (bytes != node_size_ || alignment > alignof(std::max_align_t))
      return std::pmr::new_delete_resource()->allocate(bytes, alignment);
    if (!free_) refill();
    void* p = free_;
    free_ = *static_cast<void**>(free_);
    return p;
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
    if (bytes != node_size_ || alignment > alignof(std::max_align_t)) {
      std::pmr::new_delete_resource()->deallocate(p, bytes, alignment);
      return;
    }
    *static_cast<void**>(p) = free_;
    free_ = p;
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override { return this == &other; }

  void refill() {
    const std::size_t stride =
        (node_size_ + alignof(std::max_align_t) - 1) / alignof(std::max_align_t) * alignof(std::max_align_t);
    auto* chunk = static_cast<char*>(::operator new(stride* kPerChunk));
    chunks_.push_back(chunk);
    for (std::size_t i = 0; i < kPerChunk; ++i) {
      *reinterpret_cast<void**>(chunk + i * stride) = free_;
      free_ = chunk + i * stride;
    }
  }

  std::size_t node_size_ = 0;
  void* free_ = nullptr;
  std::vector<void*> chunks_;
};

class FreeIndex {
 public:
  static constexpr std::size_t kUnit = 512;
  static constexpr std::size_t kBins = 4096;  // sizes 512 B .. 2 MiB
  static constexpr std::size_t kMaxBinned = kUnit * kBins;

  explicit FreeIndex(std::pmr::memory_resource* nodes) : large_(nodes) {}

  void insert(Block* b) {
    if (binned(b->size)) {
      std::size_t i = bin(b->size);
      Block*& head = head_slot(i);
      b->bin_prev = nullptr;
      b->bin_next = head;
      if (head) head->bin_prev = b;
      head = b;
      words_[i / 64] |= std::uint64_t{1} << (i % 64);
      summary_ |= std::uint64_t{1} << (i / 64);
    } else {
      large_.insert(b);
    }
    ++count_;
  }

  void erase(Block* b) {
    if (binned(b->size)) {
      std::size_t i = bin(b->size);
      Block*& head = heads_[i / 64][i % 64];  // b is in it: the chunk exists
      if (b->bin_prev)
        b->bin_prev->bin_next = b->bin_next;
      else
        head = b->bin_next;
      if (b->bin_next) b->bin_next->bin_prev = b->bin_prev;
      if (!head) {
        words_[i / 64] &= ~(std::uint64_t{1} << (i % 64));
        if (!words_[i / 64]) summary_ &= ~(std::uint64_t{1} << (i / 64));
      }
    } else {
      large_.erase(b);
    }
    --count_;
  }

  // The smallest block of at least `size` bytes, or nullptr.
  Block* best_fit(std::size_t size) const {
    if (binned(size)) {
      std::size_t i = bin(size);
      std::size_t w = i / 64;
      std::uint64_t bits = words_[w] & (~std::uint64_t{0} << (i % 64));
      if (!bits) {
        std::uint64_t later = w + 1 < 64 ? summary_ & (~std::uint64_t{0} << (w + 1)) : 0;
        if (later) {
          w = static_cast<std::size_t>(std::countr_zero(later));
          bits = words_[w];
        }
      }
      if (bits) return heads_[w][static_cast<std::size_t>(std::countr_zero(bits))];
    }
    Block key;
    key.size = size;
    auto it = large_.lower_bound(&key);
    return it == large_.end() ? nullptr : *it;
  }

  std::size_t size() const noexcept { return count_; }

 private:
  static bool binned(std::size_t size) { return size <= kMaxBinned; }
  // Sizes are multiples of kUnit (the allocator rounds to at least that).
  static std::size_t bin(std::size_t size) { return (size + kUnit - 1) / kUnit - 1; }

  // The head of bin i is heads_[i / 64][i % 64], in chunks of 64 made when
  // a bin of theirs first gets a block: a pool per stream and size class,
  // thousands of streams, and a flat array of 4,096 heads each took 32 KiB
  // a pool (an RMM log with 5,000 streams took over a gigabyte).
  Block*& head_slot(std::size_t i) {
    auto& chunk = heads_[i / 64];
    if (!chunk) [[unlikely]]
      chunk = std::make_unique<Block*[]>(64);
    return chunk[i % 64];
  }

  std::unique_ptr<Block*[]> heads_[kBins / 64];
  std::uint64_t words_[kBins / 64] = {};
  std::uint64_t summary_ = 0;
  std::set<Block*, BySizeThenAddress, std::pmr::polymorphic_allocator<Block*>> large_;
  std::size_t count_ = 0;
};

// Free blocks of one stream and one size class.
struct Pool {
  Pool(StreamId s, PoolKind k, std::pmr::memory_resource* nodes) : stream(s), kind(k), free(nodes) {}
  StreamId stream;
  PoolKind kind;
  FreeIndex free;
  int ranges = 0;  // expandable ranges the pool has grown
};

}  // namespace gpumem::alloc::detail
