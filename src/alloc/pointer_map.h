#pragma once
// Address -> value map for the allocator's live blocks: open addressing with
// linear probing and backward-shift deletion, so lookups touch one or two
// cache lines and neither insert nor erase allocates on the hot path.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpumem::alloc::detail {

template <typename Value>
class PointerMap {
 public:
  PointerMap() : slots_(64) {}

  // `key` must not be present and must not be 0.
  void insert(std::uintptr_t key, Value value) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    place(key, value);
    ++size_;
  }

  Value* find(std::uintptr_t key) {
    for (std::size_t i = index(key);; i = (i + 1) & mask()) {
      if (slots_[i].key == key) return &slots_[i].value;
      if (slots_[i].key == 0) return nullptr;
    }
  }

  bool erase(std::uintptr_t key) {
    std::size_t i = index(key);
    for (;; i = (i + 1) & mask()) {
      if (slots_[i].key == key) break;
      if (slots_[i].key == 0) return false;
    }
    // Shift later members of the probe run back so no tombstone is needed.
    for (std::size_t j = (i + 1) & mask();; j = (j + 1) & mask()) {
      if (slots_[j].key == 0) break;
      std::size_t home = index(slots_[j].key);
      // Slot j may move to i if its home is not cyclically within (i, j].
      bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
      if (stays) continue;
      slots_[i] = slots_[j];
      i = j;
    }
    slots_[i].key = 0;
    --size_;
    return true;
  }

  std::size_t size() const noexcept { return size_; }

  template <typename F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_)
      if (s.key != 0) f(s.key, s.value);
  }

 private:
  struct Slot {
    std::uintptr_t key = 0;
    Value value{};
  };

  std::size_t mask() const noexcept { return slots_.size() - 1; }
  std::size_t index(std::uintptr_t key) const noexcept {
    // Device pointers are 256-byte aligned: drop the zero bits, then mix.
    return static_cast<std::size_t>(((key >> 8) * 0x9E3779B97F4A7C15ull) >> 20) & mask();
  }
  void place(std::uintptr_t key, Value value) {
    std::size_t i = index(key);
    while (slots_[i].key != 0) i = (i + 1) & mask();
    slots_[i] = Slot{key, value};
  }
  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    for (const Slot& s : old)
      if (s.key != 0) place(s.key, s.value);
  }

  std::vector<Slot> slots_;
  std::size_t size_ = 0;
};

}  // namespace gpumem::alloc::detail
