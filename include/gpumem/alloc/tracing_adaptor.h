#pragma once
// An adaptor: a trace of every call over any upstream it does not own
// (which must outlive it); stacks with the other adaptors in any order
// (statistics_adaptor.h shows how). Thread-safe when its upstream is.
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

namespace gpumem::alloc {

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
