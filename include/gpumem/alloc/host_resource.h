#pragma once
// Ordinary host memory behind the MemoryResource interface, aligned as a
// device allocation would be, so adaptors and allocators can be tested and
// used with memory the host can read and write.
#include <cstddef>
#include <string>

#include "gpumem/alloc/memory_resource.h"

namespace gpumem::alloc {

class HostResource final : public MemoryResource {
 public:
  // Throws InputError unless `alignment` is a power of two.
  explicit HostResource(std::size_t alignment = kDeviceAlignment);

  std::string name() const override { return "host"; }
  std::size_t alignment() const noexcept override { return alignment_; }

 protected:
  // Streams mean nothing to host memory: it is usable at once.
  void* do_allocate(std::size_t bytes, StreamId stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, StreamId stream) noexcept override;

 private:
  std::size_t alignment_;
};

}  // namespace gpumem::alloc
