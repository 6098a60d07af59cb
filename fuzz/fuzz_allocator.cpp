// libFuzzer target: the caching allocator driven by arbitrary operation
// sequences on the simulated device.
//
// The first byte picks a configuration (expandable segments, PyTorch's
// sizes, max_split_size, garbage collection, a tiny device); then every 3
// bytes are one operation: allocate (a size from 1 byte to 8 GiB), free on
// the allocation's stream or another one, record_stream, launch or finish a
// stream's work, empty_cache. After every operation: live blocks never
// overlap and are aligned, the statistics equal the sums of what is live,
// reserved memory equals what the device has handed out. At the end, after
// freeing everything and empty_cache(), nothing stays reserved. Any
// violation aborts, as does any exception other than OutOfMemoryError.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <vector>

#include "gpumem/alloc/caching_allocator.h"
#include "gpumem/alloc/simulated_device.h"

#include "fuzz_check.h"

using gpumem::fuzz::check;

namespace {

using namespace gpumem::alloc;

AllocatorConfig config_for(std::uint8_t bits) {
  AllocatorConfig c = (bits & 1) ? AllocatorConfig::pytorch_defaults() : AllocatorConfig::gpumem_defaults();
  c.expandable_segments = (bits & 2) != 0;
  if (bits & 4) c.max_split_size = std::size_t{64} << 20;
  if (bits & 8) c.garbage_collection_threshold = 0.5;
  if (bits & 16) c.release_before_new_peak = !c.release_before_new_peak;
  c.history_capacity = (bits & 32) ? 64 : 0;
  return c;
}

struct Live {
  std::size_t bytes;
  StreamId stream;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t bits = data[0];
  SimulatedDevice device({.capacity = (bits & 64) ? std::size_t{64} << 20 : std::size_t{16} << 30});
  AllocatorConfig config = config_for(bits);
  std::map<std::uintptr_t, Live> live;
  {
    CachingAllocator a(simulated_upstream(device), config);
    std::int64_t requested = 0;
    for (std::size_t i = 1; i + 3 <= size; i += 3) {
      const std::uint8_t op = data[i] & 7, arg = data[i + 1], stream = data[i + 2] & 3;
      if (op <= 2) {
        // Size: 2^(arg / 8) scaled by the low bits: 1 byte .. 8 GiB.
        std::size_t bytes = (std::size_t{1} << (arg % 34)) + (std::size_t{data[i + 2]} << (arg % 34) >> 8);
        void* p = nullptr;
        try {
          p = a.allocate(bytes, stream);
        } catch (const OutOfMemoryError&) {
          continue;
        }
        auto addr = reinterpret_cast<std::uintptr_t>(p);
        check(addr % config.round_bytes == 0);
        auto next = live.lower_bound(addr);
        check(next == live.end() || next->first >= addr + bytes);
        check(next == live.begin() || std::prev(next)->first + std::prev(next)->second.bytes <= addr);
        live[addr] = {bytes, stream};
        requested += static_cast<std::int64_t>(bytes);
      } else if ((op == 3 || op == 4) && !live.empty()) {
        auto it = live.begin();
        std::advance(it, arg % live.size());
        StreamId on = op == 3 ? it->second.stream : stream;
        check(a.free(reinterpret_cast<void*>(it->first), on) == FreeStatus::kOk);
        requested -= static_cast<std::int64_t>(it->second.bytes);
        live.erase(it);
      } else if (op == 5 && !live.empty()) {
        auto it = live.begin();
        std::advance(it, arg % live.size());
        check(a.record_stream(reinterpret_cast<void*>(it->first), stream) == FreeStatus::kOk);
      } else if (op == 6) {
        if (arg & 1)
          device.launch(stream);
        else
          device.complete(stream);
      } else if (op == 7) {
        a.empty_cache();
      }
      AllocatorStats s = a.stats();
      check(s.allocation[kStatAll].current == static_cast<std::int64_t>(live.size()));
      check(s.requested_bytes[kStatAll].current == requested);
      check(s.allocated_bytes[kStatAll].current >= requested);
      check(s.active_bytes[kStatAll].current >= s.allocated_bytes[kStatAll].current);
      check(s.reserved_bytes[kStatAll].current >= s.active_bytes[kStatAll].current);
      check(static_cast<std::size_t>(s.reserved_bytes[kStatAll].current) == device.counters().physical_used);
    }
    check(a.free(reinterpret_cast<void*>(std::uintptr_t{1} << 20), 0) == FreeStatus::kUnknownPointer);
    for (auto& [addr, l] : live) check(a.free(reinterpret_cast<void*>(addr), l.stream) == FreeStatus::kOk);
    device.complete_all();
    a.empty_cache();
    AllocatorStats s = a.stats();
    check(s.reserved_bytes[kStatAll].current == 0 && s.active_bytes[kStatAll].current == 0);
    check(device.counters().physical_used == 0);
  }
  check(device.counters().reserved_address_bytes == 0 && device.counters().live_allocations == 0);
  return 0;
}
