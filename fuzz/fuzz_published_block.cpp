// libFuzzer target: arbitrary bytes as a file in the directory the exporter
// reads allocators' shared-memory blocks from, through the reader and on to
// the Prometheus text the exporter serves.
//
// The contract under test: read_published_stats() skips whatever is not a
// whole, valid, settled block of a live process (no crash, no read past the
// file, no hang on a sequence that stays odd), and what it keeps turns into
// metric text with one series per block.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "gpumem/alloc/stats_publisher.h"
#include "gpumem/monitor/metrics.h"

#include "fuzz_check.h"

using gpumem::fuzz::check;

namespace {

const std::filesystem::path& directory() {
  static const std::filesystem::path dir = gpumem::fuzz::scratch_folder("blocks");
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = directory() / "gpumem.fuzz";
  gpumem::fuzz::write_input(file, data, size);
  gpumem::alloc::ReadOptions options;
  options.directory = directory().string();
  options.unlink_stale = false;
  const auto blocks = gpumem::alloc::read_published_stats(options);
  check(blocks.size() <= 1);
  for (const auto& b : blocks) {
    check(b.stats.magic == gpumem::alloc::kPublishedStatsMagic);
    check(b.stats.size >= sizeof(gpumem::alloc::PublishedStats) && b.stats.size <= size);
    check(b.stats.sequence % 2 == 0);
  }
  gpumem::monitor::MonitorSnapshot snapshot;
  snapshot.hostname = "fuzz";
  snapshot.allocators = blocks;
  const std::string text = gpumem::monitor::to_text(gpumem::monitor::to_metric_families(snapshot));
  check(blocks.empty() || text.find("gpumem_allocator_reserved_bytes{") != std::string::npos);
  std::filesystem::remove(file);
  return 0;
}
