// A file of the allocator that reaches up to the traces: alloc does not use
// trace, so this must not compile (tests/layering/CMakeLists.txt).
#include "gpumem/alloc/caching_allocator.h"
#include "gpumem/trace/trace.h"

namespace gpumem::alloc {
std::size_t events_of(const trace::Trace& t) { return t.events.size(); }
}  // namespace gpumem::alloc
