// Trace speeds (issue 5's goals): replay of at least 5 million events per
// second under gpumem's policy on one core, and reading PyTorch snapshot
// pickles and Chrome traces at at least 50 MB/s; then what reading a gzip
// file costs against the plain one (issue 9). The traces are synthetic,
// written by gpumem's own writers, so the benchmark needs no input files
// (the file cases write theirs to the temporary directory). Run:
//   build/bench/gpumem_trace_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <benchmark/benchmark.h>

#include "gpumem/common/gzip.h"
#include "gpumem/trace/chrome_trace_reader.h"
#include "gpumem/trace/lifetimes.h"
#include "gpumem/trace/pytorch_snapshot.h"
#include "gpumem/trace/replay.h"

namespace gpumem::trace {
namespace {

// Training-like: layers' activations allocated forward, freed backward,
// with temporaries in between and a few sizes per layer; every allocation
// carries one of a handful of stacks, as real snapshots do.
Trace training_trace(std::size_t events) {
  Trace t;
  t.format = "synthetic";
  t.source = "synthetic";
  std::vector<std::uint32_t> contexts;
  for (int i = 0; i < 16; ++i)
    contexts.push_back(
        t.intern(Context{"",
                         {Frame{"/work/model.py", 100 + i, "forward"},
                          Frame{"/usr/lib/python3/dist-packages/torch/nn/modules/module.py", 1194, "_call_impl"}}}));
  std::mt19937_64 rng(5);
  std::uint64_t next = 1;
  std::int64_t time = 0;
  auto push = [&](Action action, std::uint64_t address, std::int64_t size, std::uint32_t context) {
    Event e;
    e.action = action;
    e.address = address;
    e.size = size;
    e.time_ns = time += 1000;
    e.context = context;
    t.events.push_back(e);
  };
  while (t.events.size() < events) {
    std::vector<std::pair<std::uint64_t, std::int64_t>> saved;
    for (int layer = 0; layer < 50; ++layer) {
      std::int64_t size = 512 * static_cast<std::int64_t>(1 + rng() % 8192);
      std::uint64_t a = (next++) << 20;
      push(Action::kAlloc, a, size, contexts[static_cast<std::size_t>(layer) % contexts.size()]);
      saved.emplace_back(a, size);
      std::uint64_t tmp = (next++) << 20;
      push(Action::kAlloc, tmp, size / 2 + 512, contexts[0]);
      push(Action::kFreeRequested, tmp, size / 2 + 512, 0);
      push(Action::kFreeCompleted, tmp, size / 2 + 512, 0);
    }
    for (auto it = saved.rbegin(); it != saved.rend(); ++it) {
      push(Action::kFreeRequested, it->first, it->second, 0);
      push(Action::kFreeCompleted, it->first, it->second, 0);
    }
  }
  return t;
}

const Trace& shared_trace() {
  static const Trace t = training_trace(2'000'000);
  return t;
}

void BM_ReplayGpumem(benchmark::State& state) {
  const Trace& t = shared_trace();
  const Lifetimes lifetimes = extract_lifetimes(t, 0, false);
  for (auto _ : state) {
    PolicyResult r = replay_policy(t, lifetimes, "gpumem", 0);
    benchmark::DoNotOptimize(r.peak_reserved);
  }
  // Events the replay consumed: allocations and their frees.
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * t.events.size()));
}
BENCHMARK(BM_ReplayGpumem)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_ExtractLifetimes(benchmark::State& state) {
  const Trace& t = shared_trace();
  for (auto _ : state) benchmark::DoNotOptimize(extract_lifetimes(t, 0, false).allocations.size());
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * t.events.size()));
}
BENCHMARK(BM_ExtractLifetimes)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_ReadPytorchSnapshot(benchmark::State& state) {
  std::ostringstream out;
  write_pytorch_snapshot(shared_trace(), out, 4);
  const std::string data = out.str();
  for (auto _ : state) benchmark::DoNotOptimize(read_pytorch_snapshot(data, "bench.pickle").events.size());
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * data.size()));
}
BENCHMARK(BM_ReadPytorchSnapshot)->Unit(benchmark::kMillisecond)->UseRealTime();

// The shared trace as torch.profiler writes it: [memory] instants.
std::string make_chrome_trace_json() {
  std::ostringstream out;
  out << "{\"traceEvents\":[\n";
  std::int64_t total = 0;
  bool first = true;
  for (const Event& e : shared_trace().events) {
    if (e.action != Action::kAlloc && e.action != Action::kFreeCompleted) continue;
    std::int64_t bytes = e.action == Action::kAlloc ? e.size : -e.size;
    total += bytes;
    out << (first ? "" : ",\n")
        << R"({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": )"
        << e.time_ns / 1000 << R"(, "args": {"Total Reserved": 0, "Total Allocated": )" << total << R"(, "Bytes": )"
        << bytes << R"(, "Addr": )" << e.address << R"(, "Device Id": 0, "Device Type": 1}})";
    first = false;
  }
  out << "\n]}\n";
  return out.str();
}

const std::string& chrome_trace_json() {
  static const std::string json = make_chrome_trace_json();
  return json;
}

void BM_ReadChromeTrace(benchmark::State& state) {
  const std::string& data = chrome_trace_json();
  for (auto _ : state) benchmark::DoNotOptimize(read_chrome_trace(data, "bench.json").events.size());
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * data.size()));
}
BENCHMARK(BM_ReadChromeTrace)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same trace as a file, plain and gzip-compressed, through read_trace:
// what `gpumem trace` pays for each. Bytes are the JSON's in both, so the
// two rates compare directly; the gzip file is counted as "file_bytes".
void read_chrome_trace_file(benchmark::State& state, bool gzipped) {
  const std::string& json = chrome_trace_json();
  const std::string contents = gzipped ? gzip::compress(json) : json;
  // Named by process: benchmarks of other checkouts may run at the same time.
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("gpumem_bench_chrome_" + std::to_string(::getpid()) + (gzipped ? ".json.gz" : ".json")))
                               .string();
  std::ofstream(path, std::ios::binary) << contents;
  for (auto _ : state) benchmark::DoNotOptimize(read_trace(path).events.size());
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * json.size()));
  state.counters["file_bytes"] = static_cast<double>(contents.size());
  std::filesystem::remove(path);
}
void BM_ReadChromeTraceFile(benchmark::State& state) { read_chrome_trace_file(state, false); }
BENCHMARK(BM_ReadChromeTraceFile)->Unit(benchmark::kMillisecond)->UseRealTime();
void BM_ReadChromeTraceGzipFile(benchmark::State& state) { read_chrome_trace_file(state, true); }
BENCHMARK(BM_ReadChromeTraceGzipFile)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace gpumem::trace
