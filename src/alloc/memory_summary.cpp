// The memory_summary() table, laid out like torch.cuda.memory_summary().
#include <string>

#include <fmt/format.h>

#include "gpumem/alloc/stats.h"
#include "gpumem/common/units.h"

namespace gpumem::alloc {
namespace {

constexpr int kWidth = 80;

std::string rule(char c) { return "|" + std::string(kWidth - 2, c) + "|\n"; }

std::string bytes_cell(std::int64_t v) { return format_bytes(static_cast<std::uint64_t>(v < 0 ? 0 : v)); }
std::string count_cell(std::int64_t v) { return format_count(static_cast<std::uint64_t>(v < 0 ? 0 : v)); }

void rows(std::string& out, const char* title, const StatArray& a, bool bytes) {
  static const char* const kNames[] = {"", "      from large pool", "      from small pool"};
  static const int kOrder[] = {0, 2, 1};  // all, large_pool, small_pool
  for (int i : kOrder) {
    const Stat& s = a[i];
    auto cell = bytes ? bytes_cell : count_cell;
    out += fmt::format("| {:<25}| {:>10} | {:>10} | {:>10} | {:>10} |\n", i == 0 ? title : kNames[i == 2 ? 1 : 2],
                       cell(s.current), cell(s.peak), cell(s.allocated), cell(s.freed));
  }
  out += rule('-');
}

}  // namespace

std::string format_memory_summary(const AllocatorStats& s) {
  std::string out = rule('=');
  out += fmt::format("|{:^{}}|\n", "gpumem caching allocator: memory summary", kWidth - 2);
  out += rule('-');
  out += fmt::format(
      "|{:^{}}|\n",
      fmt::format("device allocations (segments/maps): {}    device frees: {}", s.num_device_alloc, s.num_device_free),
      kWidth - 2);
  out += fmt::format(
      "|{:^{}}|\n",
      fmt::format("out-of-memory errors: {}    retries after freeing cache: {}", s.num_ooms, s.num_alloc_retries),
      kWidth - 2);
  out += rule('=');
  out += fmt::format("| {:<25}| {:>10} | {:>10} | {:>10} | {:>10} |\n", "Metric", "Cur Usage", "Peak Usage",
                     "Tot Alloc", "Tot Freed");
  out += rule('-');
  rows(out, "Allocated memory", s.allocated_bytes, true);
  rows(out, "Active memory", s.active_bytes, true);
  rows(out, "Requested memory", s.requested_bytes, true);
  rows(out, "GPU reserved memory", s.reserved_bytes, true);
  rows(out, "Non-releasable memory", s.inactive_split_bytes, true);
  rows(out, "Allocations", s.allocation, false);
  rows(out, "Active allocs", s.active, false);
  rows(out, "GPU reserved segments", s.segment, false);
  rows(out, "Non-releasable allocs", s.inactive_split, false);
  out += fmt::format("| {:<25}| {:>10} | {:>10} | {:>10} | {:>10} |\n", "Oversize allocations",
                     count_cell(s.oversize_allocations.current), count_cell(s.oversize_allocations.peak),
                     count_cell(s.oversize_allocations.allocated), count_cell(s.oversize_allocations.freed));
  out += fmt::format("| {:<25}| {:>10} | {:>10} | {:>10} | {:>10} |\n", "Oversize GPU segments",
                     count_cell(s.oversize_segments.current), count_cell(s.oversize_segments.peak),
                     count_cell(s.oversize_segments.allocated), count_cell(s.oversize_segments.freed));
  out += rule('=');
  return out;
}

}  // namespace gpumem::alloc
