#pragma once
// One 64-bit mixer for src/serve: MurmurHash3's finalizer (fmix64), which
// spreads every input bit over the output. The KV-cache manager hashes block
// chains and sequence ids with it; the schedulers derive token ids from it.
#include <cstdint>

namespace gpumem::serve {

inline uint64_t mix64(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

}  // namespace gpumem::serve
