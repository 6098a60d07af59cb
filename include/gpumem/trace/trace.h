#pragma once
// One event model for every memory trace gpumem reads or writes: PyTorch
// memory snapshots, torch.profiler Chrome traces, RMM logs, gpumem's own
// allocator history and MiniMalloc CSV all become a Trace, and every writer
// takes one.
//
// Events keep what the source says, in the source's order. Checking that the
// events make sense (a free of an unknown address, a double free) is the
// job of trace/lifetimes.h, not of the readers; readers reject only what
// they cannot parse.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gpumem::trace {

// PyTorch's device_traces actions, with the same names (action_name()).
enum class Action : std::uint8_t {
  kAlloc,
  kFreeRequested,  // the caller freed it; reuse may wait for other streams
  kFreeCompleted,  // the allocator may reuse it now
  kSegmentAlloc,
  kSegmentFree,
  kSegmentMap,
  kSegmentUnmap,
  kOom,
  kSnapshot,
};
const char* action_name(Action action);
// nullptr-safe reverse of action_name; false for an unknown name.
bool parse_action(std::string_view name, Action* out);

inline constexpr std::int64_t kUnknown = -1;

struct Event {
  Action action = Action::kAlloc;
  std::int32_t device = 0;
  std::uint64_t address = 0;  // alloc/free: the block's address
  std::int64_t size = 0;      // bytes, never negative (readers normalize)
  std::uint64_t stream = 0;
  std::int64_t time_ns = kUnknown;
  std::uint32_t context = 0;  // Trace::contexts index; 0: none
  // What the source reported right after this event, when it does
  // (torch.profiler's "Total Allocated"/"Total Reserved"); else kUnknown.
  std::int64_t total_allocated = kUnknown;
  std::int64_t total_reserved = kUnknown;
  bool operator==(const Event&) const = default;
};

struct Frame {
  std::string filename;
  std::int64_t line = 0;
  std::string name;
  bool operator==(const Frame&) const = default;
};

// Where an event came from: a tag (an operator name, a caller's label) and,
// when the source recorded one, a stack (innermost frame first, as PyTorch
// writes them). Contexts are interned: equal contexts share one index.
struct Context {
  std::string tag;
  std::vector<Frame> frames;
  bool operator==(const Context&) const = default;
  // "tag" or, without a tag, "name (file:line)" of the first frame that is
  // not inside torch or Python's standard library; "" for none.
  std::string label() const;
  // "name (file:line)" of the first frame that is not a library's (torch,
  // torchvision, transformers, ..., Python's standard library); "" when
  // there are no frames or all are libraries'.
  std::string user_frame() const;
};

// A block of a segment as a PyTorch snapshot lists it.
struct SnapshotBlock {
  std::uint64_t address = 0;
  std::int64_t size = 0;
  std::int64_t requested_size = 0;
  std::string state;  // "active_allocated", "active_pending_free", "inactive"
  std::uint32_t context = 0;
};

struct SnapshotSegment {
  std::int32_t device = 0;
  std::uint64_t address = 0;
  std::int64_t total_size = 0;
  std::uint64_t stream = 0;
  std::string segment_type;  // "small" or "large"
  bool expandable = false;
  std::vector<SnapshotBlock> blocks;
};

struct Trace {
  std::string format;  // "pytorch-snapshot", "chrome-trace", "rmm-log", "gpumem-history", "minimalloc-csv"
  std::string source;  // file name, for messages
  // The allocator policy whose choices the events record, when the source
  // says so (a gpumem history's "allocator", as `gpumem train --trace` and
  // `trace convert` write it); replay's advice compares against it.
  std::string recorded_under;
  // "gpumem-perfetto" for a timeline gpumem wrote for viewing, which keeps
  // no allocation events to read back.
  std::string written_by;
  std::vector<Event> events;
  std::vector<Context> contexts{Context{}};  // [0] is "no context"
  // The allocator state at the end, when the source has it (PyTorch
  // snapshots' "segments").
  std::vector<SnapshotSegment> segments;
  // Where the source itself says the caller's iterations ran, in time
  // order: torch.profiler's "ProfilerStep#N" spans (prof.step() opens one
  // per step), [start, end] in nanoseconds. Empty when the source has none.
  struct StepSpan {
    std::int64_t start_ns = 0;
    std::int64_t end_ns = 0;
  };
  std::vector<StepSpan> profiler_steps;
  // What a reader worked around instead of failing (without --strict), one
  // line each naming the place: "t.pickle: byte 5120: the file ends inside
  // an object; kept the 812 events read before it".
  std::vector<std::string> warnings;
  std::uint64_t skipped_records = 0;  // records a reader could not use

  // Index of an equal context, added if new.
  std::uint32_t intern(Context context);

 private:
  std::unordered_map<std::string, std::uint32_t> context_index_;
};

// Throws InputError when the trace holds nothing to analyse (no allocation
// and no segment), saying what is missing and how to record it: a
// torch.profiler trace made without profile_memory=True has operators but
// no memory events, a snapshot taken without _record_memory_history() and
// with nothing allocated has neither history nor segments. With
// history_needed (replay), segments alone are not enough either.
void require_memory_events(const Trace& trace, bool history_needed = false);

// The most bytes gpumem reads from one trace file: the file's size or, for a
// gzip file, what it decompresses to. Reading holds a trace's bytes and
// about as much again in events, so this keeps a trace within a machine's
// memory; it is counted as the bytes arrive, so a gzip bomb stops here.
inline constexpr std::uint64_t kMaxTraceBytes = std::uint64_t{4} << 30;

struct ReadOptions {
  // Reject rather than skip what a reader cannot use (an action it does not
  // know, a record it cannot read). Unusable events are otherwise counted in
  // Trace-level notes by the reader (see each reader's header).
  bool strict = false;
  // Over this, read_trace fails (tests lower it).
  std::uint64_t max_bytes = kMaxTraceBytes;
};

// Reads any supported file; detects the format. A gzip file (told by its
// first bytes, 1f 8b, whatever its name; every member of it) is
// decompressed first, and damaged gzip data is an error whatever
// options.strict says. Throws InputError with the file, the place (byte
// offset, line or event number) and the problem; places inside a gzip
// file's content name the file "FILE (decompressed)".
Trace read_trace(const std::string& path, const ReadOptions& options = {});

// Writes a writer's output to `path` atomically (write_file_atomically),
// gzip-compressed when the name ends in ".gz".
void write_trace_file(const std::string& path, std::string_view contents);

}  // namespace gpumem::trace
