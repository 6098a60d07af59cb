// An inference engine's memory, with gpumem embedded: the caching allocator
// hands out device memory (here over the simulated GPU; a real engine passes
// CudaDeviceResource or the C API's gpumem_cuda_device_create), and the paged
// KV-cache manager keeps each sequence's block table.
//
// Built against an installed gpumem (examples/embed/CMakeLists.txt):
//   find_package(gpumem REQUIRED COMPONENTS alloc serve)
// It links gpumem's allocator, the planner it uses, the KV manager and
// common; no ONNX, protobuf or prometheus-cpp.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "gpumem/alloc/caching_allocator.h"
#include "gpumem/alloc/simulated_device.h"
#include "gpumem/serve/kv_block_manager.h"

using gpumem::alloc::CachingAllocator;
using gpumem::alloc::kStatAll;
using gpumem::alloc::SimulatedDevice;
using gpumem::serve::KvBlockManager;

int main() {
  // A 16 GiB GPU, and the allocator over it with gpumem's defaults.
  SimulatedDevice device({.capacity = std::size_t{16} << 30});
  CachingAllocator allocator(gpumem::alloc::simulated_upstream(device));

  // The KV pool: 1,024 blocks of 16 tokens, 128 KiB each (a 1B-parameter
  // model's K and V across its layers), taken from the allocator at once.
  constexpr std::uint32_t kBlocks = 1024;
  constexpr std::size_t kBlockBytes = std::size_t{128} << 10;
  void* pool = allocator.allocate(kBlocks * kBlockBytes, /*stream=*/0);
  KvBlockManager kv({.num_blocks = kBlocks, .block_tokens = 16, .max_sequences = 64});

  // Two requests that share a 32-token system prompt: the second reuses its
  // two full blocks from the prefix cache.
  std::vector<std::uint32_t> prompt(40);
  for (std::uint32_t i = 0; i < prompt.size(); ++i) prompt[i] = i < 32 ? 7 : 100 + i;
  std::uint32_t cached = 0;
  if (!kv.add_sequence(1, prompt, &cached)) return EXIT_FAILURE;
  prompt.back() = 999;
  if (!kv.add_sequence(2, prompt, &cached)) return EXIT_FAILURE;

  // Activations of one step come and go through the cache.
  for (int step = 0; step < 3; ++step) {
    void* activations = allocator.allocate(std::size_t{48} << 20, 0);
    const std::vector<std::uint32_t> token = {static_cast<std::uint32_t>(step)};
    kv.append_tokens(1, token);
    kv.append_tokens(2, token);
    allocator.deallocate(activations, std::size_t{48} << 20, 0);
  }

  const auto stats = allocator.stats();
  std::printf("kv: %u of %u blocks used, %u prompt tokens from the prefix cache\n", kv.used_blocks(), kv.num_blocks(),
              cached);
  std::printf("allocator: %lld bytes allocated, %lld reserved at the peak, %lld device calls\n",
              static_cast<long long>(stats.allocated_bytes[kStatAll].current),
              static_cast<long long>(stats.reserved_bytes[kStatAll].peak),
              static_cast<long long>(stats.num_device_alloc));
  kv.free_sequence(1);
  kv.free_sequence(2);
  allocator.deallocate(pool, kBlocks * kBlockBytes, 0);
  // The second request found the shared prompt's two blocks cached.
  return cached == 32 ? EXIT_SUCCESS : EXIT_FAILURE;
}
