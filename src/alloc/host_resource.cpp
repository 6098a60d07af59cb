// HostResource: aligned host memory from posix_memalign.
#include "gpumem/alloc/host_resource.h"

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/common/units.h"

namespace gpumem::alloc {

HostResource::HostResource(std::size_t alignment) : alignment_(alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    throw InputError(fmt::format("host memory alignment {} is not a power of two", alignment));
}

void* HostResource::do_allocate(std::size_t bytes, StreamId) {
  if (bytes == 0) return nullptr;
  // posix_memalign wants a multiple of sizeof(void*); any larger power of
  // two keeps the promised alignment. Unlike std::aligned_alloc it takes
  // sizes that are not multiples of the alignment.
  const std::size_t align = alignment_ < sizeof(void*) ? sizeof(void*) : alignment_;
  void* ptr = nullptr;
  if (const int rc = ::posix_memalign(&ptr, align, bytes); rc != 0)
    throw OutOfMemoryError(fmt::format("host: cannot allocate {} aligned to {} bytes: {}", format_bytes(bytes),
                                       alignment_, std::strerror(rc)),
                           bytes);
  return ptr;
}

void HostResource::do_deallocate(void* ptr, std::size_t, StreamId) noexcept { std::free(ptr); }

}  // namespace gpumem::alloc
