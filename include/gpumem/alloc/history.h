#pragma once
// A bounded record of what an allocator did: every allocation, free,
// segment change and out-of-memory, with time, address, size, stream and the
// caller's tag. Written as JSON lines, it is the trace format gpumem's replay
// and visualization read (docs/allocator.md, "Statistics, snapshots, history").
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gpumem/alloc/memory_resource.h"

namespace gpumem::alloc {

// The actions of PyTorch's snapshot device_traces, with the same names.
enum class HistoryAction : std::uint8_t {
  kAlloc,
  kFreeRequested,
  kFreeCompleted,
  kSegmentAlloc,
  kSegmentFree,
  kSegmentMap,
  kSegmentUnmap,
  kOom,
};
// "alloc", "free_requested", ... as in PyTorch's trace entries.
const char* action_name(HistoryAction action);

// Small integers standing for caller-supplied strings ("attention.qkv",
// "optimizer.state"); 0 is "no tag". Interned once, cheap to pass around.
using TagId = std::uint32_t;
inline constexpr TagId kNoTag = 0;

class TagTable {
 public:
  TagTable();
  TagId intern(std::string_view name);  // thread-safe
  std::string name(TagId tag) const;    // "" for kNoTag or unknown ids

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, TagId> ids_;
};

struct HistoryEvent {
  HistoryAction action;
  std::uint64_t time_ns;  // steady clock, since the history was created
  std::uint64_t address;
  std::uint64_t size;       // bytes (for alloc: the rounded block size)
  std::uint64_t requested;  // alloc: bytes asked for; otherwise = size
  StreamId stream;
  TagId tag;
};

// A ring buffer of the last `capacity` events. Not synchronized: its owner
// (an allocator or the tracing adaptor) records under its own lock.
class History {
 public:
  explicit History(std::size_t capacity);

  void record(HistoryAction action, std::uint64_t address, std::uint64_t size, std::uint64_t requested, StreamId stream,
              TagId tag) {
    if (!ring_.empty()) append(action, address, size, requested, stream, tag);  // off: one compare
  }
  // Oldest first.
  std::vector<HistoryEvent> events() const;
  std::size_t capacity() const noexcept { return ring_.size(); }
  // Events that fell out of the ring because it was full.
  std::uint64_t dropped() const noexcept { return total_ > ring_.size() ? total_ - ring_.size() : 0; }
  std::uint64_t total_recorded() const noexcept { return total_; }
  void clear();

 private:
  void append(HistoryAction action, std::uint64_t address, std::uint64_t size, std::uint64_t requested, StreamId stream,
              TagId tag);

  std::vector<HistoryEvent> ring_;
  std::uint64_t total_ = 0;
  std::uint64_t start_ns_;
};

// JSON lines: a header object, then one object per event, oldest first:
//   {"format":"gpumem-history","version":1,"events":N,"dropped":D}
//   {"action":"alloc","time_ns":T,"addr":A,"size":S,"requested":R,"stream":K,"tag":"name"}
// "tag" is omitted when there is none; "requested" only on alloc.
void write_history_jsonl(std::ostream& out, const std::vector<HistoryEvent>& events, std::uint64_t dropped,
                         const TagTable& tags);

}  // namespace gpumem::alloc
