// Memory for FailedStates' table: anonymous pages from the system, which
// come zeroed and are only backed once touched, asked for as huge pages.
#include <sys/mman.h>

#include <cstdlib>
#include <new>

#include "plan/skyline_search.h"

namespace gpumem::plan::detail {

void* FailedStates::zeroed_table(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  // A hint: where transparent huge pages are off, 4 KiB pages serve.
  (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
  return p;
}

void FailedStates::free_table(void* p, size_t bytes) noexcept {
  if (p) munmap(p, bytes);
}

}  // namespace gpumem::plan::detail
