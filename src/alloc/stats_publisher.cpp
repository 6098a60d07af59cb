// Allocator statistics in shared memory: the publisher (a thread that
// rewrites one block under a sequence lock) and the reader an exporter uses
// (discovery in /dev/shm, validation, stale-process cleanup).
#include "gpumem/alloc/stats_publisher.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <random>
#include <system_error>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace gpumem::alloc {
namespace {

constexpr std::size_t kWords = sizeof(PublishedStats) / sizeof(std::uint64_t);
static_assert(sizeof(PublishedStats) % sizeof(std::uint64_t) == 0);
constexpr std::size_t kSequenceWord = offsetof(PublishedStats, sequence) / sizeof(std::uint64_t);

// The block in shared memory as 64-bit words, each accessed atomically, so
// a reader racing the writer reads stale or new words, never a torn one.
std::uint64_t* words(PublishedStats* block) { return reinterpret_cast<std::uint64_t*>(block); }
const std::uint64_t* words(const PublishedStats* block) { return reinterpret_cast<const std::uint64_t*>(block); }

std::uint64_t load(const std::uint64_t& word, std::memory_order order) {
  return std::atomic_ref<std::uint64_t>(const_cast<std::uint64_t&>(word)).load(order);
}
void store(std::uint64_t& word, std::uint64_t value, std::memory_order order) {
  std::atomic_ref<std::uint64_t>(word).store(value, order);
}

std::uint64_t u64(std::int64_t v) { return v < 0 ? 0 : static_cast<std::uint64_t>(v); }

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

// Field 3 (state) and field 22 (start time in clock ticks since boot) of
// /proc/<pid>/stat; false when it cannot be read. The command name (field
// 2) may hold spaces and parentheses, so fields are counted after its last ')'.
bool proc_stat(std::uint64_t pid, char& state, std::uint64_t& start) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!in || !std::getline(in, line)) return false;
  const auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return false;
  const char* p = line.c_str() + close + 2;  // field 3
  state = *p;
  for (int field = 3; field < 22; ++field) {
    p = std::strchr(p, ' ');
    if (!p) return false;
    ++p;
  }
  char* end = nullptr;
  start = std::strtoull(p, &end, 10);
  return end != p;
}

std::uint64_t own_start() {
  char state = 0;
  std::uint64_t start = 0;
  return proc_stat(static_cast<std::uint64_t>(getpid()), state, start) ? start : 0;
}

// Whether the process that wrote a block is gone: no such pid, a zombie, or
// the pid now belongs to a process started at another time.
bool process_gone(const PublishedStats& block) {
  if (block.pid == 0 || block.pid > static_cast<std::uint64_t>(INT32_MAX)) return true;
  const auto pid = static_cast<pid_t>(block.pid);
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  char state = 0;
  std::uint64_t start = 0;
  if (!proc_stat(block.pid, state, start)) return false;  // alive as far as we can tell
  if (state == 'Z' || state == 'X') return true;
  return start != block.process_start;
}

// The block in an open file, copied with pread (never mapped: the file's
// owner may truncate it under us, and a mapping would then fault). Two
// copies with the same even sequence, or false.
bool read_block_from_file(int fd, PublishedStats& block) {
  for (int t = 0; t < 64; ++t) {
    PublishedStats first;
    PublishedStats second;
    if (pread(fd, &first, sizeof first, 0) != static_cast<ssize_t>(sizeof first)) return false;
    if (first.sequence & 1) {
      std::this_thread::yield();
      continue;
    }
    if (pread(fd, &second, sizeof second, 0) != static_cast<ssize_t>(sizeof second)) return false;
    if (std::memcmp(&first, &second, sizeof first) == 0) {
      block = first;
      return true;
    }
  }
  return false;
}

// Whether the block `name` was written by this very process (another
// publisher of the same name), rather than left by one that had our pid.
bool published_by_us(const std::string& name, std::uint64_t start) {
  const int fd = shm_open(name.c_str(), O_RDONLY | O_NOFOLLOW, 0);
  if (fd < 0) return false;
  PublishedStats block;
  const bool read = read_block_from_file(fd, block);
  close(fd);
  return read && block.magic == kPublishedStatsMagic && block.pid == static_cast<std::uint64_t>(getpid()) &&
         block.process_start == start;
}

// The effective user of a live process (/proc/<pid>/status, "Uid:" real,
// effective, ...), who owns the files it creates. Not the owner of
// /proc/<pid>: that is root for a process that changed its user.
std::optional<uid_t> owner_of(std::uint64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Uid:", 0) != 0) continue;
    unsigned long real = 0;
    unsigned long effective = 0;
    if (std::sscanf(line.c_str(), "Uid: %lu %lu", &real, &effective) != 2) return std::nullopt;
    return static_cast<uid_t>(effective);
  }
  return std::nullopt;
}

// What a read decides about one file.
enum class Verdict { kKeep, kGone, kRejected };

}  // namespace

void fill_published_figures(PublishedStats& b, const StatsSample& sample) {
  const AllocatorStats& s = sample.stats;
  b.allocated_bytes = u64(s.allocated_bytes[kStatAll].current);
  b.allocated_bytes_peak = u64(s.allocated_bytes[kStatAll].peak);
  b.reserved_bytes = u64(s.reserved_bytes[kStatAll].current);
  b.reserved_bytes_peak = u64(s.reserved_bytes[kStatAll].peak);
  b.active_bytes = u64(s.active_bytes[kStatAll].current);
  b.active_bytes_peak = u64(s.active_bytes[kStatAll].peak);
  b.requested_bytes = u64(s.requested_bytes[kStatAll].current);
  b.cached_free_bytes = sample.free_space.free_bytes;
  b.largest_free_block = sample.free_space.largest_block;
  b.fragmentation_ppm =
      sample.free_space.free_bytes == 0
          ? 0
          : static_cast<std::uint64_t>(
                1e6 * (1.0 - double(sample.free_space.largest_block) / double(sample.free_space.free_bytes)) + 0.5);
  b.allocations = u64(s.allocation[kStatAll].current);
  b.segments = u64(s.segment[kStatAll].current);
  b.segments_peak = u64(s.segment[kStatAll].peak);
  b.device_allocs = u64(s.num_device_alloc);
  b.device_frees = u64(s.num_device_free);
  b.alloc_retries = u64(s.num_alloc_retries);
  b.ooms = u64(s.num_ooms);
  b.capacity = sample.capacity;
}

void write_published_block(PublishedStats* shared, const PublishedStats& value) noexcept {
  std::uint64_t in[kWords];
  std::memcpy(in, &value, sizeof in);
  std::uint64_t* out = words(shared);
  const std::uint64_t seq = load(out[kSequenceWord], std::memory_order_relaxed);
  store(out[kSequenceWord], seq + 1, std::memory_order_relaxed);  // odd: being written
  std::atomic_thread_fence(std::memory_order_release);            // ...before any figure
  for (std::size_t i = 0; i < kWords; ++i)
    if (i != kSequenceWord) store(out[i], in[i], std::memory_order_relaxed);
  store(out[kSequenceWord], seq + 2, std::memory_order_release);  // even: complete
}

bool read_published_block(const PublishedStats* shared, PublishedStats& result, int tries) noexcept {
  const std::uint64_t* in = words(shared);
  std::uint64_t out[kWords];
  for (int t = 0; t < tries; ++t) {
    const std::uint64_t before = load(in[kSequenceWord], std::memory_order_acquire);
    if (before & 1) {
      std::this_thread::yield();
      continue;
    }
    for (std::size_t i = 0; i < kWords; ++i) out[i] = load(in[i], std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);  // the figures before the second look
    if (load(in[kSequenceWord], std::memory_order_relaxed) == before) {
      out[kSequenceWord] = before;
      std::memcpy(&result, out, sizeof out);
      return true;
    }
  }
  return false;
}

// The mapping, the header and the thread that refreshes the block.
class StatsPublisher::Thread {
 public:
  Thread(const std::string& name, const PublisherOptions& options) : name_(name), interval_(options.interval) {
    const std::uint64_t start = own_start();
    int fd = shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0644);
    if (fd < 0 && errno == EEXIST) {
      if (published_by_us(name_, start))
        throw std::system_error(EEXIST, std::generic_category(),
                                "shm_open " + name_ +
                                    ": this process publishes there already (give each publisher "
                                    "its own device or name)");
      // Left by an exited process that had our pid, or made by another user
      // to squat the name: unlink it if we may, else publish under a name
      // of our own (readers go by the prefix and the block's own pid).
      if (shm_unlink(name_.c_str()) == 0) {
        fd = shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0644);
      } else {
        const std::string base = name_;
        std::random_device random;
        for (int attempt = 0; attempt < 8 && fd < 0; ++attempt) {
          name_ = fmt::format("{}.{:08x}", base, random());
          fd = shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0644);
        }
      }
    }
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "shm_open " + name_);
    if (ftruncate(fd, sizeof(PublishedStats)) != 0) {
      const int e = errno;
      close(fd);
      shm_unlink(name_.c_str());
      throw std::system_error(e, std::generic_category(), "ftruncate " + name_);
    }
    void* p = mmap(nullptr, sizeof(PublishedStats), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const int e = errno;
    close(fd);
    if (p == MAP_FAILED) {
      shm_unlink(name_.c_str());
      throw std::system_error(e, std::generic_category(), "mmap " + name_);
    }
    shared_ = static_cast<PublishedStats*>(p);
    std::memset(&header_, 0, sizeof header_);
    header_.magic = kPublishedStatsMagic;
    header_.version = kPublishedStatsVersion;
    header_.size = sizeof(PublishedStats);
    header_.pid = static_cast<std::uint64_t>(getpid());
    header_.device = static_cast<std::uint64_t>(options.device < 0 ? 0 : options.device);
    header_.process_start = start;
    header_.start_time_ns = now_ns();
    header_.interval_ns = static_cast<std::uint64_t>(interval_.count() < 0 ? 0 : interval_.count());
  }

  const std::string& name() const noexcept { return name_; }

  ~Thread() {
    {
      std::lock_guard lock(stop_mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
    munmap(shared_, sizeof(PublishedStats));
    shm_unlink(name_.c_str());
  }

  void start(const Source& source) {
    thread_ = std::thread([this, &source] {
      std::unique_lock lock(stop_mutex_);
      while (!wake_.wait_for(lock, interval_, [this] { return stop_; })) {
        lock.unlock();
        try {
          publish(source());
        } catch (...) {
          // A failing source leaves the last good figures; the next interval tries again.
        }
        lock.lock();
      }
    });
  }

  // One writer at a time: the thread and publish_now's callers.
  void publish(const StatsSample& sample) {
    std::lock_guard lock(write_mutex_);
    PublishedStats block = header_;
    fill_published_figures(block, sample);
    block.update_time_ns = now_ns();
    block.updates = ++updates_;
    write_published_block(shared_, block);
  }

 private:
  std::string name_;
  std::chrono::nanoseconds interval_;
  PublishedStats* shared_ = nullptr;
  PublishedStats header_;
  std::mutex write_mutex_;
  std::uint64_t updates_ = 0;
  std::mutex stop_mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

StatsPublisher::StatsPublisher(const CachingAllocator& allocator, PublisherOptions options)
    : StatsPublisher(
          [&allocator] {
            StatsSample sample;
            sample.stats = allocator.stats(sample.free_space);
            sample.capacity = allocator.capacity();
            return sample;
          },
          std::move(options)) {}

StatsPublisher::StatsPublisher(Source source, PublisherOptions options)
    : name_(options.name.empty() ? "/gpumem." + std::to_string(getpid()) + "." + std::to_string(options.device)
                                 : options.name),
      source_(std::move(source)) {
  thread_ = std::make_unique<Thread>(name_, options);
  name_ = thread_->name();      // another name when the usual one was squatted
  thread_->publish(source_());  // valid as soon as the constructor returns
  thread_->start(source_);
}

StatsPublisher::~StatsPublisher() = default;

void StatsPublisher::publish_now() { thread_->publish(source_()); }

bool plausible_published_stats(const PublishedStats& b) noexcept {
  constexpr std::uint64_t kLimit = std::uint64_t{1} << 56;
  for (std::uint64_t v :
       {b.allocated_bytes, b.allocated_bytes_peak, b.reserved_bytes, b.reserved_bytes_peak, b.active_bytes,
        b.active_bytes_peak, b.requested_bytes, b.cached_free_bytes, b.largest_free_block, b.capacity})
    if (v >= kLimit) return false;
  return b.allocated_bytes <= b.reserved_bytes && b.active_bytes <= b.reserved_bytes &&
         b.requested_bytes <= b.allocated_bytes && b.allocated_bytes <= b.allocated_bytes_peak &&
         b.reserved_bytes <= b.reserved_bytes_peak && b.active_bytes <= b.active_bytes_peak &&
         b.segments <= b.segments_peak && b.largest_free_block <= b.cached_free_bytes &&
         b.cached_free_bytes <= b.reserved_bytes && b.fragmentation_ppm <= 1'000'000 &&
         (b.capacity == 0 || b.reserved_bytes <= b.capacity) && b.device < 1024;
}

PublishedStatsReader::PublishedStatsReader(ReadOptions options) : options_(std::move(options)) {}

namespace {

// Whether `uid` is root or a member of `group` (its primary group or a
// supplementary one, as the user database says).
bool owner_in_group(uid_t uid, gid_t group) {
  if (uid == 0) return true;
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buffer(16384);
  if (getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr) return false;
  if (entry.pw_gid == group) return true;
  int count = 64;
  std::vector<gid_t> groups(static_cast<std::size_t>(count));
  if (getgrouplist(entry.pw_name, entry.pw_gid, groups.data(), &count) == -1) {
    groups.resize(static_cast<std::size_t>(count));
    if (getgrouplist(entry.pw_name, entry.pw_gid, groups.data(), &count) == -1) return false;
  }
  groups.resize(static_cast<std::size_t>(count));
  return std::find(groups.begin(), groups.end(), group) != groups.end();
}

std::array<std::uint64_t, 4> counters_of(const PublishedStats& b) {
  return {b.device_allocs, b.device_frees, b.alloc_retries, b.ooms};
}

template <typename TrustedOwner>
Verdict judge(const std::string& path, PublishedStats& block, TrustedOwner&& trusted_owner) {
  // O_NOFOLLOW, O_NONBLOCK (a FIFO must not hang us) and the checks below.
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? Verdict::kGone : Verdict::kRejected;
  struct stat st {};
  const bool regular =
      fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= static_cast<off_t>(sizeof(PublishedStats));
  const bool read = regular && read_block_from_file(fd, block);
  close(fd);
  if (!read || block.magic != kPublishedStatsMagic || block.version != kPublishedStatsVersion ||
      block.size < sizeof(PublishedStats) || static_cast<std::uint64_t>(st.st_size) < block.size)
    return Verdict::kRejected;
  if (block.process_start == 0) return Verdict::kRejected;  // a publisher always knows its start
  if (process_gone(block)) return Verdict::kGone;
  // Another user's file naming our pid, a root shell, pid 1: refused.
  const std::optional<uid_t> owner = owner_of(block.pid);
  if (!owner || (*owner != st.st_uid && !trusted_owner(st.st_uid))) return Verdict::kRejected;
  if (!plausible_published_stats(block)) return Verdict::kRejected;
  return Verdict::kKeep;
}

}  // namespace

std::vector<PublishedBlock> PublishedStatsReader::read() {
  std::vector<PublishedBlock> result;
  DIR* dir = opendir(options_.directory.c_str());
  if (!dir) return result;
  std::vector<std::string> names;
  while (const dirent* entry = readdir(dir)) {
    const std::string file = entry->d_name;
    if (file.rfind(options_.prefix, 0) == 0 && file != "." && file != "..") names.push_back(file);
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  if (names.size() > options_.max_blocks) {
    rejected_ += names.size() - options_.max_blocks;
    names.resize(options_.max_blocks);
  }

  const auto trusted_owner = [this](uid_t uid) {
    if (!options_.trusted_group) return false;
    const auto known = std::find_if(trusted_owners_.begin(), trusted_owners_.end(),
                                    [uid](const auto& entry) { return entry.first == uid; });
    if (known != trusted_owners_.end()) return known->second;
    const bool member = owner_in_group(uid, *options_.trusted_group);
    if (trusted_owners_.size() < 4096) trusted_owners_.emplace_back(uid, member);
    return member;
  };
  std::vector<std::pair<std::string, Seen>> seen;
  for (const std::string& file : names) {
    const std::string path = options_.directory + "/" + file;
    PublishedStats block;
    switch (judge(path, block, trusted_owner)) {
      case Verdict::kGone:
        if (options_.unlink_stale) unlink(path.c_str());
        continue;
      case Verdict::kRejected: ++rejected_; continue;
      case Verdict::kKeep: break;
    }
    // An update count that went back, or some counters but not all of
    // them (a reset zeroes them together): someone rewrote the block.
    const auto last = std::find_if(seen_.begin(), seen_.end(), [&](const auto& s) { return s.first == file; });
    const std::array<std::uint64_t, 4> counters = counters_of(block);
    if (last != seen_.end() && last->second.start_time_ns == block.start_time_ns) {
      const bool some_back = !std::equal(counters.begin(), counters.end(), last->second.counters.begin(),
                                         [](std::uint64_t now, std::uint64_t before) { return now >= before; });
      const bool none_ahead = std::equal(counters.begin(), counters.end(), last->second.counters.begin(),
                                         [](std::uint64_t now, std::uint64_t before) { return now <= before; });
      if (block.updates < last->second.updates || (some_back && !none_ahead)) {
        ++rejected_;
        continue;
      }
    }
    seen.emplace_back(file, Seen{block.start_time_ns, block.updates, counters});
    result.push_back({"/" + file, block});
  }
  seen_ = std::move(seen);
  // One series per pid and device: the block under the publisher's own name
  // wins over any other claiming the same pair.
  std::sort(result.begin(), result.end(), [](const PublishedBlock& a, const PublishedBlock& b) {
    if (a.stats.pid != b.stats.pid) return a.stats.pid < b.stats.pid;
    if (a.stats.device != b.stats.device) return a.stats.device < b.stats.device;
    const auto own = [](const PublishedBlock& x) {
      return x.name == fmt::format("/gpumem.{}.{}", x.stats.pid, x.stats.device);
    };
    return own(a) > own(b);
  });
  const auto same = [](const PublishedBlock& a, const PublishedBlock& b) {
    return a.stats.pid == b.stats.pid && a.stats.device == b.stats.device;
  };
  const auto end = std::unique(result.begin(), result.end(), same);
  rejected_ += static_cast<std::uint64_t>(result.end() - end);
  result.erase(end, result.end());
  return result;
}

std::vector<PublishedBlock> read_published_stats(const ReadOptions& options) {
  return PublishedStatsReader(options).read();
}

}  // namespace gpumem::alloc
