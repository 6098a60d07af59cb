#pragma once
// An adaptor: a byte budget over any upstream it does not own (which must
// outlive it); stacks with the other adaptors in any order
// (statistics_adaptor.h shows how). Thread-safe when its upstream is.
#include <atomic>
#include <cstddef>
#include <string>

#include "gpumem/alloc/memory_resource.h"

namespace gpumem::alloc {

// Refuses requests that would take the bytes in use past a budget, with an
// OutOfMemoryError naming the budget, the bytes in use and the request. Each
// allocation counts its size rounded up to the upstream's alignment, since
// that is what it really occupies there.
class LimitingAdaptor final : public MemoryResource {
 public:
  LimitingAdaptor(MemoryResource& upstream, std::size_t limit_bytes) : upstream_(upstream), limit_(limit_bytes) {}

  std::string name() const override { return "limiting(" + upstream_.name() + ")"; }
  std::size_t alignment() const noexcept override { return upstream_.alignment(); }
  MemoryResource& upstream() const noexcept { return upstream_; }

  std::size_t limit() const noexcept { return limit_; }
  // Bytes counted against the budget now (rounded sizes).
  std::size_t used() const noexcept { return used_.load(std::memory_order_relaxed); }

 protected:
  void* do_allocate(std::size_t bytes, StreamId stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, StreamId stream) noexcept override;

 private:
  std::size_t charged_size(std::size_t bytes) const noexcept;

  MemoryResource& upstream_;
  const std::size_t limit_;
  std::atomic<std::size_t> used_{0};
};

}  // namespace gpumem::alloc
