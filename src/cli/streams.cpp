#include "cli/streams.h"

namespace gpumem::cli {

Streams& current_streams() {
  thread_local Streams streams;
  return streams;
}

}  // namespace gpumem::cli
