// Reserved memory at peak, gpumem's allocator against a configuration that
// mimics PyTorch's defaults, on the same allocation sequences.
//   build/bench/gpumem_alloc_compare [--capacity GiB]
// Prints a Markdown table; the goal is that gpumem is never worse.
#include <cstdio>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "alloc_workloads.h"
#include "gpumem/common/units.h"

using namespace gpumem;
using namespace gpumem::alloc;

int main(int argc, char** argv) {
  std::size_t capacity = std::size_t{80} << 30;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--capacity") capacity = std::stoull(argv[i + 1]) << 30;
  struct Policy {
    const char* name;
    AllocatorConfig config;
  };
  const Policy policies[] = {
      {"pytorch", AllocatorConfig::pytorch_defaults()},
      {"gpumem", AllocatorConfig::gpumem_defaults()},
      {"pytorch-expandable", parse_allocator_config("preset:pytorch,expandable_segments:true")},
      {"gpumem-expandable", parse_allocator_config("expandable_segments:true")},
  };
  std::printf("| workload | ops | peak allocated | policy | peak reserved | reserved/allocated | device calls |\n");
  std::printf("|---|---:|---:|---|---:|---:|---:|\n");
  for (const bench::Workload& w : bench::all_workloads(GPUMEM_SOURCE_DIR)) {
    for (const Policy& p : policies) {
      bench::ReplayResult r = bench::replay(w, p.config, capacity);
      std::printf("| %s | %zu | %s | %s | %s | %.3f | %lld |%s\n", w.name.c_str(), w.ops.size(),
                  format_bytes(r.peak_allocated).c_str(), p.name, format_bytes(r.peak_reserved).c_str(),
                  double(r.peak_reserved) / double(r.peak_allocated), static_cast<long long>(r.device_calls),
                  r.ooms ? fmt::format(" {} OOM", r.ooms).c_str() : "");
    }
  }
}
