// The KV-cache manager's operations per second on one thread (goal, issue
// 14: at least 1M/s). A serving step's calls: a request admitted with a
// prompt whose shared prefix is in the prefix cache, decodes appending one
// token each, a finished request freed; and a beam fork whose first append
// copies the shared last block. Run:
//   build/bench/gpumem_serve_bench --benchmark_repetitions=9 --benchmark_report_aggregates_only=true
#include <vector>

#include <benchmark/benchmark.h>

#include "gpumem/serve/kv_block_manager.h"

namespace gpumem::serve {
namespace {

constexpr uint32_t kPrompt = 256, kShared = 224, kDecodes = 32, kLive = 64;

KvBlockManagerConfig config() {
  KvBlockManagerConfig c;
  c.num_blocks = 4096;
  c.block_tokens = 16;
  c.max_sequences = 256;
  c.max_blocks_per_sequence = 256;
  return c;
}

// Per iteration: 1 add (224 of 256 tokens hit), 32 one-token appends, 1
// free, with 64 sequences live: 34 operations.
void BM_AddAppendFree(benchmark::State& state) {
  KvBlockManager m(config());
  std::vector<uint32_t> prompt(kPrompt);
  for (uint32_t i = 0; i < kPrompt; ++i) prompt[i] = 1000 + i;
  uint64_t next = 0;
  uint32_t token = 1u << 20;
  auto admit = [&] {
    for (uint32_t i = kShared; i < kPrompt; ++i) prompt[i] = token++;  // a unique tail
    m.add_sequence(next++, prompt);
  };
  for (uint32_t i = 0; i < kLive; ++i) admit();
  uint64_t hits = 0;
  for (auto _ : state) {
    m.free_sequence(next - kLive);
    uint32_t cached = 0;
    for (uint32_t i = kShared; i < kPrompt; ++i) prompt[i] = token++;
    benchmark::DoNotOptimize(m.add_sequence(next, prompt, &cached));
    hits += cached;
    for (uint32_t d = 0; d < kDecodes; ++d) {
      const uint32_t t = token++;
      benchmark::DoNotOptimize(m.append_tokens(next, std::span<const uint32_t>(&t, 1)));
    }
    ++next;
  }
  if (hits != static_cast<uint64_t>(state.iterations()) * (kShared / 16) * 16)
    state.SkipWithError("prefix cache missed");
  state.SetItemsProcessed(state.iterations() * (kDecodes + 2));
  state.counters["ops/s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * (kDecodes + 2)), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AddAppendFree);

// Per iteration: fork a 100-token sequence, append one token to the child
// (copy-on-write of the shared 4-token last block), free the child: 3
// operations.
void BM_ForkCopyOnWriteFree(benchmark::State& state) {
  KvBlockManager m(config());
  std::vector<uint32_t> prompt(100);
  for (uint32_t i = 0; i < 100; ++i) prompt[i] = i;
  m.add_sequence(0, prompt);
  const uint32_t t = 7;
  for (auto _ : state) {
    m.fork(0, 1);
    benchmark::DoNotOptimize(m.append_tokens(1, std::span<const uint32_t>(&t, 1)));
    m.free_sequence(1);
  }
  if (m.stats().cow_copies != static_cast<uint64_t>(state.iterations())) state.SkipWithError("no copy-on-write");
  state.SetItemsProcessed(state.iterations() * 3);
  state.counters["ops/s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * 3), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ForkCopyOnWriteFree);

}  // namespace
}  // namespace gpumem::serve
