#pragma once
// Adaptors that add one feature to any memory resource, as RMM's do: byte
// and allocation counts, a byte budget, a trace of every call. Each sits over
// an upstream it does not own (the upstream must outlive it) and can be
// stacked in any order, e.g. statistics over a budget over the simulated GPU:
//
//   SimulatedDevice device;
//   LimitingAdaptor budget(device, 1 << 30);
//   StatisticsAdaptor stats(budget);
//
// Every adaptor is thread-safe when its upstream is.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gpumem/alloc/history.h"
#include "gpumem/alloc/memory_resource.h"
#include "gpumem/alloc/stats.h"

namespace gpumem::alloc {

// What StatisticsAdaptor counted since it was made (peaks since reset_peak).
struct StatisticsCounters {
  Stat bytes;        // bytes as requested by callers
  Stat allocations;  // allocations handed out
};

class StatisticsAdaptor final : public MemoryResource {
 public:
  explicit StatisticsAdaptor(MemoryResource& upstream) : upstream_(upstream) {}

  std::string name() const override { return "statistics(" + upstream_.name() + ")"; }
  std::size_t alignment() const noexcept override { return upstream_.alignment(); }
  MemoryResource& upstream() const noexcept { return upstream_; }

  StatisticsCounters counters() const;
  // Peaks start again from the current values.
  void reset_peak();

 protected:
  void* do_allocate(std::size_t bytes, StreamId stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, StreamId stream) noexcept override;

 private:
  MemoryResource& upstream_;
  mutable std::mutex mutex_;
  StatisticsCounters counters_;
};

// Refuses requests that would take the bytes in use past a budget, with an
// OutOfMemoryError naming the budget, the bytes in use and the request. Each
// allocation counts its size rounded up to the upstream's alignment, since
// that is what it really occupies there.
class LimitingAdaptor final : public MemoryResource {
 public:
  LimitingAdaptor(MemoryResource& upstream, std::size_t limit_bytes) : upstream_(upstream), limit_(limit_bytes) {}

  std::string name() const override { return "limiting(" + upstream_.name() + ")"; }
  std::size_t alignment() const noexcept override { return upstream_.alignment(); }
  MemoryResource& upstream() const noexcept { return upstream_; }

  std::size_t limit() const noexcept { return limit_; }
  // Bytes counted against the budget now (rounded sizes).
  std::size_t used() const noexcept { return used_.load(std::memory_order_relaxed); }

 protected:
  void* do_allocate(std::size_t bytes, StreamId stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, StreamId stream) noexcept override;

 private:
  std::size_t charged_size(std::size_t bytes) const noexcept;

  MemoryResource& upstream_;
  const std::size_t limit_;
  std::atomic<std::size_t> used_{0};
};

// Records every allocation, free and out-of-memory into a History ring
// buffer, in the JSON-lines trace format replay and visualization read. A
// deallocate is recorded as "free_requested": the adaptor sees the caller's
// request, not when the upstream reuses the memory in stream order.
class TracingAdaptor final : public MemoryResource {
 public:
  static constexpr std::size_t kDefaultCapacity = std::size_t{1} << 16;

  // Keeps the last `capacity` events (0: records nothing).
  explicit TracingAdaptor(MemoryResource& upstream, std::size_t capacity = kDefaultCapacity)
      : upstream_(upstream), history_(capacity) {}

  std::string name() const override { return "tracing(" + upstream_.name() + ")"; }
  std::size_t alignment() const noexcept override { return upstream_.alignment(); }
  MemoryResource& upstream() const noexcept { return upstream_; }

  // allocate() with a tag that names the allocation (and its free) in the trace.
  void* allocate_tagged(std::size_t bytes, StreamId stream, TagId tag);
  TagId intern_tag(std::string_view name) { return tags_.intern(name); }
  const TagTable& tags() const noexcept { return tags_; }

  // Oldest first.
  std::vector<HistoryEvent> events() const;
  // Events that fell out of the ring because it was full.
  std::uint64_t dropped() const;
  // The header line, then one JSON object per event (write_history_jsonl).
  void write_jsonl(std::ostream& out) const;
  void clear();

 protected:
  void* do_allocate(std::size_t bytes, StreamId stream) override { return allocate_tagged(bytes, stream, kNoTag); }
  void do_deallocate(void* ptr, std::size_t bytes, StreamId stream) noexcept override;

 private:
  MemoryResource& upstream_;
  TagTable tags_;
  mutable std::mutex mutex_;
  History history_;
  // Tags of live tagged allocations, so their frees carry the tag too.
  std::unordered_map<const void*, TagId> live_tags_;
};

}  // namespace gpumem::alloc
