#pragma once
// Allocator statistics published in shared memory (issue 15), so that an
// exporter process can find and read every process's allocators without
// touching their hot paths.
//
// Each StatsPublisher owns a POSIX shared-memory object, "/gpumem.<pid>.<device>"
// (on Linux: /dev/shm/gpumem.<pid>.<device>), holding one PublishedStats. A
// background thread refreshes it every `interval` from the allocator's
// stats(), under a sequence lock: the sequence is odd while the block is
// being written, and a reader keeps a copy only if it read the same even
// sequence before and after. Nothing is added to allocate() or free(); the
// only cost to them is the publisher taking the allocator's lock once per
// interval. The layout is documented in docs/allocator.md for readers in
// other languages.
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "gpumem/alloc/caching_allocator.h"
#include "gpumem/alloc/stats.h"

#include <sys/types.h>

namespace gpumem::alloc {

// "GPUMEMST" read as a little-endian 64-bit integer.
inline constexpr std::uint64_t kPublishedStatsMagic = 0x5453'4D45'4D55'5047ULL;
inline constexpr std::uint32_t kPublishedStatsVersion = 1;

// One process's and device's figures, in the host's byte order. Every field
// is a 64-bit word but version and size, which share one; there is no
// padding. Fields are only ever appended (readers accept `size` at least their own); a
// change to existing fields bumps `version`. Byte sizes are exact bytes;
// "current" values unless the name says peak; counts are since the
// allocator's creation or its last reset_accumulated_stats().
struct PublishedStats {
  // -- header
  std::uint64_t magic;           // kPublishedStatsMagic
  std::uint32_t version;         // kPublishedStatsVersion
  std::uint32_t size;            // sizeof(PublishedStats) of the writer
  std::uint64_t sequence;        // seqlock: odd while being written
  std::uint64_t pid;             // the publishing process
  std::uint64_t device;          // the device index the allocator serves
  std::uint64_t process_start;   // the process's start (/proc/<pid>/stat field 22, clock ticks since boot; 0 unknown)
  std::uint64_t start_time_ns;   // when publishing began, ns since the Unix epoch
  std::uint64_t update_time_ns;  // when the figures were taken, ns since the Unix epoch
  std::uint64_t updates;         // blocks written so far (1 after the first)
  std::uint64_t interval_ns;     // the refresh interval
  // -- figures
  std::uint64_t allocated_bytes;       // allocated_bytes.all.current
  std::uint64_t allocated_bytes_peak;  // allocated_bytes.all.peak
  std::uint64_t reserved_bytes;        // reserved_bytes.all.current
  std::uint64_t reserved_bytes_peak;   // reserved_bytes.all.peak
  std::uint64_t active_bytes;          // active_bytes.all.current
  std::uint64_t active_bytes_peak;     // active_bytes.all.peak
  std::uint64_t requested_bytes;       // requested_bytes.all.current
  std::uint64_t cached_free_bytes;     // bytes in free cached blocks (mapped ones, for expandable segments)
  std::uint64_t largest_free_block;    // the longest stretch of them
  std::uint64_t fragmentation_ppm;     // 1e6 * (1 - largest_free_block / cached_free_bytes); 0 when nothing is free
  std::uint64_t allocations;           // allocation.all.current
  std::uint64_t segments;              // segment.all.current
  std::uint64_t segments_peak;         // segment.all.peak
  std::uint64_t device_allocs;         // num_device_alloc
  std::uint64_t device_frees;          // num_device_free
  std::uint64_t alloc_retries;         // num_alloc_retries
  std::uint64_t ooms;                  // num_ooms
  std::uint64_t capacity;              // the device's capacity in bytes (0 unknown)
};
static_assert(std::is_trivially_copyable_v<PublishedStats>);
static_assert(std::is_standard_layout_v<PublishedStats>);
static_assert(sizeof(PublishedStats) == 224);
static_assert(offsetof(PublishedStats, version) == 8);
static_assert(offsetof(PublishedStats, size) == 12);
static_assert(offsetof(PublishedStats, sequence) == 16);
static_assert(offsetof(PublishedStats, pid) == 24);
static_assert(offsetof(PublishedStats, device) == 32);
static_assert(offsetof(PublishedStats, process_start) == 40);
static_assert(offsetof(PublishedStats, start_time_ns) == 48);
static_assert(offsetof(PublishedStats, update_time_ns) == 56);
static_assert(offsetof(PublishedStats, updates) == 64);
static_assert(offsetof(PublishedStats, interval_ns) == 72);
static_assert(offsetof(PublishedStats, allocated_bytes) == 80);
static_assert(offsetof(PublishedStats, cached_free_bytes) == 136);
static_assert(offsetof(PublishedStats, fragmentation_ppm) == 152);
static_assert(offsetof(PublishedStats, device_allocs) == 184);
static_assert(offsetof(PublishedStats, capacity) == 216);

// What a publisher's source returns: the allocator's figures of one moment.
struct StatsSample {
  AllocatorStats stats;
  FreeSpace free_space;
  std::size_t capacity = 0;
};

struct PublisherOptions {
  std::chrono::nanoseconds interval = std::chrono::milliseconds(5);
  int device = 0;
  // The shared-memory name, starting with '/'. Empty: "/gpumem.<pid>.<device>".
  std::string name;
};

// Fills the figures of `block` from `sample` (the header is left alone).
void fill_published_figures(PublishedStats& block, const StatsSample& sample);

// The seqlock, over a block in shared memory. One writer at a time per
// block; readers never block it. read_published_block retries up to `tries`
// times while a write is in progress and returns false if none succeeded.
void write_published_block(PublishedStats* shared, const PublishedStats& value) noexcept;
bool read_published_block(const PublishedStats* shared, PublishedStats& out, int tries = 1000) noexcept;

class StatsPublisher {
 public:
  using Source = std::function<StatsSample()>;
  // Publishes `allocator`, which must outlive the publisher.
  explicit StatsPublisher(const CachingAllocator& allocator, PublisherOptions options = {});
  // Publishes whatever `source` returns; it is called from the publisher's
  // thread (and from publish_now's caller).
  explicit StatsPublisher(Source source, PublisherOptions options = {});
  // Creates the shared-memory object (replacing one left by an exited
  // process that had this pid), writes the first block, then starts the
  // thread. Throws std::system_error when the object cannot be made, or
  // (EEXIST) when another publisher in this process uses the name.
  ~StatsPublisher();  // stops the thread and unlinks the object
  StatsPublisher(const StatsPublisher&) = delete;
  StatsPublisher& operator=(const StatsPublisher&) = delete;

  const std::string& name() const noexcept { return name_; }
  // Takes and writes the figures now, from the calling thread.
  void publish_now();

 private:
  class Thread;
  std::string name_;
  Source source_;
  std::unique_ptr<Thread> thread_;
};

struct PublishedBlock {
  std::string name;  // the shared-memory name, "/gpumem.<pid>.<device>"
  PublishedStats stats;
};

struct ReadOptions {
  std::string directory = "/dev/shm";  // where the system keeps shared-memory objects
  std::string prefix = "gpumem.";      // objects whose names start with this are read
  bool unlink_stale = true;            // unlink the blocks of processes that are gone
  std::size_t max_blocks = 1024;       // files examined per read (by name); the rest are rejected
  // Files owned by a member of this group (or by root) may speak for a
  // process of another user: a job that created its block and then changed
  // its user, or service accounts that publish for each other. Unset: only
  // the process's own user (docs/exporter.md, "Threat model").
  std::optional<gid_t> trusted_group;
};

// The directory is writable by every local user, so a block is a claim to
// check, never a fact (docs/exporter.md, "Threat model"). A block is read
// with pread into a copy (a mapping of a file its owner can truncate would
// fault), and kept only when:
//  - it is a regular file, not a link, of at least its own size, with
//    gpumem's magic and version, read with the same even sequence twice;
//  - the pid it names is alive, owned by the file's owner (or the file's
//    owner is root or in ReadOptions::trusted_group), and started when the
//    block says (a block without a start time is refused);
//  - its figures are possible (plausible_published_stats);
//  - no other block claims the same pid and device (the one under the
//    publisher's own name, /gpumem.<pid>.<device>, is kept);
//  - its update count has not gone back since the last read, and its
//    counters (device allocations and frees, retries, out-of-memory
//    errors) went back all together or not at all: a reset of the
//    accumulated statistics zeroes them together (a reader that lives
//    across reads only).
// Blocks of processes that are gone are dropped and, where permitted,
// unlinked; anything else refused is counted in rejected().
class PublishedStatsReader {
 public:
  explicit PublishedStatsReader(ReadOptions options = {});
  // Every block that passes, sorted by pid then device.
  std::vector<PublishedBlock> read();
  std::uint64_t rejected() const noexcept { return rejected_; }  // since construction

 private:
  ReadOptions options_;
  std::uint64_t rejected_ = 0;
  struct Seen {
    std::uint64_t start_time_ns;
    std::uint64_t updates;
    std::array<std::uint64_t, 4> counters;  // device_allocs, device_frees, alloc_retries, ooms
  };
  std::vector<std::pair<uid_t, bool>> trusted_owners_;  // group membership, looked up once per owner
  std::vector<std::pair<std::string, Seen>> seen_;      // by name, from the last read
};

// Whether a block's figures could come from an allocator: allocated and
// active within reserved, requested within allocated, peaks at least the
// current values, the largest free block within the free bytes, those
// within reserved, fragmentation within [0, 1], reserved within the
// capacity when it is known, every size under 2^56 bytes.
bool plausible_published_stats(const PublishedStats& block) noexcept;

// One read by a reader that remembers nothing.
std::vector<PublishedBlock> read_published_stats(const ReadOptions& options = {});

}  // namespace gpumem::alloc
