// Allocator statistics in shared memory: the figures read back equal
// stats(), an exited process's block disappears, a reader never sees a torn
// block, and short or foreign files are skipped.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpumem/alloc/caching_allocator.h"
#include "gpumem/alloc/simulated_device.h"
#include "gpumem/alloc/stats_publisher.h"

namespace gpumem::alloc {
namespace {

using namespace std::chrono_literals;

std::uint64_t self() { return static_cast<std::uint64_t>(getpid()); }

// This process's start (/proc/self/stat field 22), which a block must carry.
std::uint64_t self_start() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  std::getline(in, line);
  std::istringstream fields(line.substr(line.rfind(')') + 2));
  std::string field;
  for (int i = 3; i <= 22; ++i) fields >> field;
  return std::stoull(field);
}

// A block this process could have written: its pid and start, plausible figures.
PublishedStats plausible_block() {
  PublishedStats b{};
  b.magic = kPublishedStatsMagic;
  b.version = kPublishedStatsVersion;
  b.size = sizeof(PublishedStats);
  b.pid = self();
  b.process_start = self_start();
  b.allocated_bytes = b.allocated_bytes_peak = 42;
  b.reserved_bytes = b.reserved_bytes_peak = 2 << 20;
  b.active_bytes = b.active_bytes_peak = 42;
  b.cached_free_bytes = b.largest_free_block = (2 << 20) - 42;
  b.capacity = 1 << 30;
  b.updates = 5;
  return b;
}

bool exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

// This process's block for `device`, if a reader finds it.
std::optional<PublishedStats> find_block(std::uint64_t pid, std::uint64_t device) {
  for (const PublishedBlock& b : read_published_stats())
    if (b.stats.pid == pid && b.stats.device == device) return b.stats;
  return std::nullopt;
}

TEST(StatsPublisher, ReadBackEqualsTheAllocatorsStats) {
  SimulatedDevice device;
  CachingAllocator allocator(simulated_upstream(device));
  const int dev = 7;
  std::string path;
  {
    StatsPublisher publisher(allocator, {.interval = 1ms, .device = dev, .name = {}});
    EXPECT_EQ(publisher.name(), "/gpumem." + std::to_string(getpid()) + "." + std::to_string(dev));
    path = "/dev/shm" + publisher.name();
    ASSERT_TRUE(exists(path));

    // Free blocks between live ones, so the cache is fragmented, and a
    // large allocation with a segment of its own.
    std::vector<void*> small;
    for (int i = 0; i < 8; ++i) small.push_back(allocator.allocate(4096 * static_cast<std::size_t>(i + 1)));
    void* large = allocator.allocate(30 << 20);
    for (std::size_t i = 0; i < small.size(); i += 2) allocator.deallocate(small[i], 0);
    const auto after = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());

    // Wait for a refresh taken after the last change.
    std::optional<PublishedStats> got;
    for (int i = 0; i < 2000; ++i) {
      got = find_block(self(), dev);
      if (got && got->update_time_ns > after) break;
      std::this_thread::sleep_for(1ms);
    }
    ASSERT_TRUE(got);
    ASSERT_GT(got->update_time_ns, after);
    FreeSpace space;
    const AllocatorStats s = allocator.stats(space);
    EXPECT_EQ(got->magic, kPublishedStatsMagic);
    EXPECT_EQ(got->version, kPublishedStatsVersion);
    EXPECT_EQ(got->size, sizeof(PublishedStats));
    EXPECT_EQ(got->sequence % 2, 0u);
    EXPECT_GE(got->updates, 2u);
    EXPECT_EQ(got->interval_ns, 1'000'000u);
    EXPECT_GT(got->process_start, 0u);
    EXPECT_EQ(got->allocated_bytes, std::uint64_t(s.allocated_bytes[kStatAll].current));
    EXPECT_EQ(got->allocated_bytes_peak, std::uint64_t(s.allocated_bytes[kStatAll].peak));
    EXPECT_EQ(got->reserved_bytes, std::uint64_t(s.reserved_bytes[kStatAll].current));
    EXPECT_EQ(got->reserved_bytes_peak, std::uint64_t(s.reserved_bytes[kStatAll].peak));
    EXPECT_EQ(got->active_bytes, std::uint64_t(s.active_bytes[kStatAll].current));
    EXPECT_EQ(got->requested_bytes, std::uint64_t(s.requested_bytes[kStatAll].current));
    EXPECT_EQ(got->allocations, 5u);
    EXPECT_EQ(got->segments, std::uint64_t(s.segment[kStatAll].current));
    EXPECT_EQ(got->segments, 2u);
    EXPECT_EQ(got->device_allocs, std::uint64_t(s.num_device_alloc));
    EXPECT_EQ(got->device_frees, std::uint64_t(s.num_device_free));
    EXPECT_EQ(got->ooms, 0u);
    EXPECT_EQ(got->capacity, allocator.capacity());
    EXPECT_EQ(got->cached_free_bytes, space.free_bytes);
    EXPECT_EQ(got->largest_free_block, space.largest_block);
    // The small segment: 2 MiB less the allocated bytes is free, in pieces.
    EXPECT_EQ(got->cached_free_bytes, got->reserved_bytes - got->allocated_bytes);
    EXPECT_LT(got->largest_free_block, got->cached_free_bytes);
    const double fragmentation = 1.0 - double(space.largest_block) / double(space.free_bytes);
    EXPECT_NEAR(double(got->fragmentation_ppm), 1e6 * fragmentation, 1.0);
    EXPECT_GT(got->fragmentation_ppm, 0u);

    allocator.deallocate(large, 0);
    for (std::size_t i = 1; i < small.size(); i += 2) allocator.deallocate(small[i], 0);
  }
  EXPECT_FALSE(exists(path)) << "the destructor unlinks the block";
  EXPECT_FALSE(find_block(self(), dev));
}

TEST(StatsPublisher, TwoPublishersOfOneNameAreRefusedButAStaleBlockIsReplaced) {
  SimulatedDevice device;
  CachingAllocator allocator(simulated_upstream(device));
  const std::string name = "/gpumem.twice" + std::to_string(getpid()) + ".0";
  // A block an earlier process with our pid left behind: replaced.
  PublishedStats stale{};
  stale.magic = kPublishedStatsMagic;
  stale.pid = self();
  stale.process_start = 1;
  {
    std::ofstream out("/dev/shm" + name, std::ios::binary);
    out.write(reinterpret_cast<const char*>(&stale), sizeof stale);
  }
  StatsPublisher first(allocator, {.interval = 1h, .device = 0, .name = name});
  // A second publisher of the same name in this process: refused, and the
  // first one's block stays.
  EXPECT_THROW(StatsPublisher(allocator, {.interval = 1h, .device = 0, .name = name}), std::system_error);
  EXPECT_TRUE(exists("/dev/shm" + name));
  const std::vector<PublishedBlock> blocks = read_published_stats({.prefix = name.substr(1)});
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_NE(blocks[0].stats.process_start, 1u);
  EXPECT_EQ(blocks[0].stats.capacity, allocator.capacity());
}

TEST(StatsPublisher, AProcessThatExitsWithoutCleanupLeavesNoBlock) {
  int ready[2], go[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(go), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Publish, say so, wait for the word, and die without destructors.
    SimulatedDevice device;
    CachingAllocator allocator(simulated_upstream(device));
    void* p = allocator.allocate(1 << 20);
    (void)p;
    StatsPublisher publisher(allocator, {.interval = 1ms, .device = 3, .name = {}});
    char c = 'r';
    if (write(ready[1], &c, 1) != 1) _exit(2);
    if (read(go[0], &c, 1) != 1) _exit(3);
    _exit(0);
  }
  close(ready[1]);
  close(go[0]);
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  const auto pid = static_cast<std::uint64_t>(child);
  const std::string path = "/dev/shm/gpumem." + std::to_string(child) + ".3";
  std::optional<PublishedStats> alive = find_block(pid, 3);
  ASSERT_TRUE(alive) << "the child's block is readable while it runs";
  EXPECT_EQ(alive->allocated_bytes, 1u << 20);
  ASSERT_TRUE(exists(path));

  ASSERT_EQ(write(go[1], &c, 1), 1);
  // Wait for the exit but leave the child a zombie: its pid still answers
  // kill(pid, 0), and the reader must drop it all the same.
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);
  EXPECT_EQ(info.si_status, 0);
  EXPECT_TRUE(exists(path)) << "nothing cleaned up on _exit";
  EXPECT_FALSE(find_block(pid, 3));
  EXPECT_FALSE(exists(path)) << "the reader unlinks the stale block";

  // And once reaped (no such pid), a block left behind is dropped too.
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  close(ready[0]);
  close(go[1]);
}

TEST(StatsPublisher, AReaderNeverSeesATornBlock) {
  // Every figure of write k is k: a block whose figures differ is torn.
  std::atomic<std::uint64_t> k{0};
  auto source = [&k] {
    const auto v = static_cast<std::int64_t>(k.fetch_add(1) + 1);
    StatsSample s;
    for (StatArray* a : {&s.stats.allocated_bytes, &s.stats.reserved_bytes, &s.stats.active_bytes,
                         &s.stats.requested_bytes, &s.stats.allocation, &s.stats.segment})
      (*a)[kStatAll].current = (*a)[kStatAll].peak = v;
    s.stats.num_device_alloc = s.stats.num_device_free = s.stats.num_alloc_retries = s.stats.num_ooms = v;
    s.free_space = {static_cast<std::size_t>(v), static_cast<std::size_t>(v)};
    s.capacity = static_cast<std::size_t>(v);
    return s;
  };
  const std::string name = "/gpumem.torn" + std::to_string(getpid()) + ".0";
  StatsPublisher publisher(source, {.interval = 1h, .device = 0, .name = name});

  const int fd = shm_open(name.c_str(), O_RDONLY, 0);
  ASSERT_GE(fd, 0);
  void* p = mmap(nullptr, sizeof(PublishedStats), PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  ASSERT_NE(p, MAP_FAILED);
  const auto* shared = static_cast<const PublishedStats*>(p);

  std::atomic<bool> stop{false};
  std::thread writer([&] {
    while (!stop.load(std::memory_order_relaxed)) publisher.publish_now();
  });
  int torn = 0, reads = 0;
  std::set<std::uint64_t> seen;
  // Read until many distinct blocks were seen, i.e. reads raced many
  // writes (bounded: the machine may be busy).
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (seen.size() < 2000 && std::chrono::steady_clock::now() < deadline) {
    PublishedStats b;
    if (!read_published_block(shared, b)) continue;
    ++reads;
    const std::uint64_t v = b.allocated_bytes;
    seen.insert(v);
    const std::uint64_t figures[] = {b.allocated_bytes_peak,
                                     b.reserved_bytes,
                                     b.reserved_bytes_peak,
                                     b.active_bytes,
                                     b.active_bytes_peak,
                                     b.requested_bytes,
                                     b.cached_free_bytes,
                                     b.largest_free_block,
                                     b.allocations,
                                     b.segments,
                                     b.segments_peak,
                                     b.device_allocs,
                                     b.device_frees,
                                     b.alloc_retries,
                                     b.ooms,
                                     b.capacity,
                                     b.updates};
    for (std::uint64_t f : figures) torn += f != v;
    torn += b.magic != kPublishedStatsMagic || b.sequence % 2 != 0;
  }
  stop = true;
  writer.join();
  munmap(p, sizeof(PublishedStats));
  EXPECT_EQ(torn, 0);
  EXPECT_GT(reads, 1000);
  EXPECT_GE(seen.size(), 2000u) << "the reads raced the writes";
}

void write_file(const std::string& path, const void* data, std::size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
}

TEST(StatsPublisher, ShortForeignAndStaleFilesAreSkipped) {
  const std::string tag = std::to_string(getpid());
  const std::string dir = "/dev/shm/";
  PublishedStats good = plausible_block();
  good.device = 5;

  const std::string short_file = "gpumem.x" + tag + ".short";
  write_file(dir + short_file, &good, 10);
  const std::string empty_file = "gpumem.x" + tag + ".empty";
  write_file(dir + empty_file, &good, 0);
  PublishedStats foreign = good;
  foreign.magic = 0x1234;
  const std::string foreign_file = "gpumem.x" + tag + ".foreign";
  write_file(dir + foreign_file, &foreign, sizeof foreign);
  PublishedStats future = good;
  future.version = 99;
  const std::string future_file = "gpumem.x" + tag + ".future";
  write_file(dir + future_file, &future, sizeof future);
  PublishedStats bigger = good;
  bigger.size = sizeof(PublishedStats) + 64;  // claims more than the file holds
  const std::string bigger_file = "gpumem.x" + tag + ".bigger";
  write_file(dir + bigger_file, &bigger, sizeof bigger);
  PublishedStats odd = good;
  odd.sequence = 1;  // forever being written
  const std::string odd_file = "gpumem.x" + tag + ".odd";
  write_file(dir + odd_file, &odd, sizeof odd);
  // Our pid, but a process started at another time: the pid was reused.
  PublishedStats reused = good;
  reused.process_start = 1;
  const std::string reused_file = "gpumem.x" + tag + ".reused";
  write_file(dir + reused_file, &reused, sizeof reused);
  // A valid block of this (living) process, for contrast.
  const std::string good_file = "gpumem.x" + tag + ".good";
  write_file(dir + good_file, &good, sizeof good);

  const std::vector<PublishedBlock> blocks = read_published_stats({.prefix = "gpumem.x" + tag + "."});
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks[0].name, "/" + good_file);
  EXPECT_EQ(blocks[0].stats.allocated_bytes, 42u);

  EXPECT_FALSE(exists(dir + reused_file)) << "a stale block is unlinked";
  for (const std::string& f : {short_file, empty_file, foreign_file, future_file, bigger_file, odd_file, good_file}) {
    EXPECT_TRUE(exists(dir + f)) << f << ": not ours to remove";
    unlink((dir + f).c_str());
  }
  // A directory that is not there reads as nothing.
  EXPECT_TRUE(read_published_stats({.directory = "/nonexistent-gpumem-dir"}).empty());
}

// Every local user can write to /dev/shm: a block is a claim, checked
// before it becomes a series (issue 34).
TEST(StatsPublisherThreatModel, ClaimsThatCannotBeTrueAreRejectedAndCounted) {
  const std::string tag = std::to_string(getpid());
  const std::string dir = "/dev/shm/";
  const std::string prefix = "gpumem.t" + tag + ".";
  std::vector<std::string> files;
  const auto put = [&](const std::string& name, const PublishedStats& b) {
    write_file(dir + prefix + name, &b, sizeof b);
    files.push_back(dir + prefix + name);
  };
  PublishedStats good = plausible_block();
  put("a-good", good);
  // Another user's process: pid 1 (root's) in a file of ours, or, run as
  // root, a file of nobody's naming our pid.
  PublishedStats foreign_owner = good;
  foreign_owner.device = 1;
  if (geteuid() == 0) {
    put("b-owner", foreign_owner);
    ASSERT_EQ(chown(files.back().c_str(), 65534, 65534), 0);
  } else {
    foreign_owner.pid = 1;
    put("b-owner", foreign_owner);
  }
  PublishedStats no_start = good;
  no_start.device = 2;
  no_start.process_start = 0;  // skips the pid-reuse check: refused
  put("c-nostart", no_start);
  PublishedStats impossible = good;
  impossible.device = 3;
  impossible.reserved_bytes = impossible.reserved_bytes_peak = 1;  // less than allocated
  put("d-impossible", impossible);
  PublishedStats ratio = good;
  ratio.device = 4;
  ratio.fragmentation_ppm = 18'000'000'000'000'000;
  put("e-ratio", ratio);
  PublishedStats huge = good;
  huge.device = 6;
  huge.reserved_bytes = huge.reserved_bytes_peak = huge.capacity = 18'000'000'000'000'000'000ull;
  put("f-huge", huge);
  put("g-duplicate", good);  // the same pid and device as a-good

  PublishedStatsReader reader({.prefix = prefix, .unlink_stale = false});
  std::vector<PublishedBlock> blocks = reader.read();
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks[0].name, "/" + prefix + "a-good");
  EXPECT_EQ(reader.rejected(), 6u);

  // The update count going back: someone rewrote the block. The other
  // claim to the same pid and device, which did not go back, is kept.
  good.updates = 2;
  write_file(dir + prefix + "a-good", &good, sizeof good);
  blocks = reader.read();
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks[0].name, "/" + prefix + "g-duplicate");
  EXPECT_EQ(reader.rejected(), 12u);
  // A reader that remembers nothing takes it (and still refuses the rest).
  EXPECT_EQ(read_published_stats({.prefix = prefix, .unlink_stale = false}).size(), 1u);

  // At most max_blocks files a read.
  PublishedStatsReader capped({.prefix = prefix, .unlink_stale = false, .max_blocks = 3});
  capped.read();
  EXPECT_EQ(capped.rejected(), 6u);  // 4 not examined; of a, b and c, b and c refused
  for (const std::string& f : files) unlink(f.c_str());
}

// Counters (device allocations and frees, retries, out-of-memory errors)
// may go back only all together, as a reset of the accumulated statistics
// takes them back: some going back while others go on is a rewrite.
TEST(StatsPublisherThreatModel, CountersGoBackTogetherOrNotAtAll) {
  const std::string prefix = "gpumem.c" + std::to_string(getpid()) + ".";
  const std::string file = "/dev/shm/" + prefix + "0";
  PublishedStats b = plausible_block();
  b.device_allocs = 10;
  b.device_frees = 5;
  b.alloc_retries = 2;
  b.ooms = 1;
  write_file(file, &b, sizeof b);
  PublishedStatsReader reader({.prefix = prefix, .unlink_stale = false});
  ASSERT_EQ(reader.read().size(), 1u);

  b.updates += 1;
  b.device_allocs = 3;  // back, while the frees go on
  b.device_frees = 6;
  write_file(file, &b, sizeof b);
  EXPECT_TRUE(reader.read().empty());
  EXPECT_EQ(reader.rejected(), 1u);

  b.updates += 1;
  b.device_allocs = 1;  // a reset: every counter at or under where it was
  b.device_frees = 0;
  b.alloc_retries = 0;
  b.ooms = 0;
  write_file(file, &b, sizeof b);
  EXPECT_EQ(reader.read().size(), 1u);
  EXPECT_EQ(reader.rejected(), 1u);
  unlink(file.c_str());
}

// A block in a file of another user naming our process is refused, unless
// that user is in the group the exporter was told to trust (--trusted-group).
TEST(StatsPublisherThreatModel, ATrustedGroupMaySpeakForAnotherUsersProcess) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to make a file of another user (nobody)";
  const std::string prefix = "gpumem.g" + std::to_string(getpid()) + ".";
  const std::string file = "/dev/shm/" + prefix + "0";
  const PublishedStats b = plausible_block();
  write_file(file, &b, sizeof b);
  ASSERT_EQ(chown(file.c_str(), 65534, 65534), 0);  // nobody, whose group is nogroup (65534)
  EXPECT_TRUE(read_published_stats({.prefix = prefix, .unlink_stale = false}).empty());
  EXPECT_TRUE(read_published_stats({.prefix = prefix, .unlink_stale = false, .trusted_group = 4}).empty())
      << "nobody is not in group 4 (adm)";
  const std::vector<PublishedBlock> trusted =
      read_published_stats({.prefix = prefix, .unlink_stale = false, .trusted_group = 65534});
  ASSERT_EQ(trusted.size(), 1u);
  EXPECT_EQ(trusted[0].stats.pid, b.pid);
  unlink(file.c_str());
}

// A block truncated and restored while it is read (a mapping would fault
// with SIGBUS): every read ends, with the block or without it.
TEST(StatsPublisherThreatModel, ABlockTruncatedUnderTheReaderNeverFaults) {
  const std::string name = "gpumem.flicker" + std::to_string(getpid()) + ".0";
  const std::string path = "/dev/shm/" + name;
  PublishedStats block = plausible_block();
  block.sequence = 3;  // odd: the reader retries while the size flips
  write_file(path, &block, sizeof block);
  std::atomic<bool> stop{false};
  std::thread flicker([&] {
    const int fd = open(path.c_str(), O_RDWR);
    while (!stop.load()) {
      (void)ftruncate(fd, 0);
      (void)ftruncate(fd, sizeof block);
      (void)pwrite(fd, &block, sizeof block, 0);
    }
    close(fd);
  });
  PublishedStatsReader reader({.prefix = name, .unlink_stale = false});
  for (int i = 0; i < 2000; ++i) EXPECT_TRUE(reader.read().empty());
  stop = true;
  flicker.join();
  EXPECT_EQ(reader.rejected(), 2000u);
  unlink(path.c_str());
}

// A name squatted by another user: the publisher publishes under a name of
// its own instead of failing. Needs a second user: run as root, the child
// becomes nobody and the squatter's file is root's.
TEST(StatsPublisherThreatModel, ASquattedNameGetsANameOfItsOwn) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to play two users (the squatter and the publisher)";
  int report[2];
  ASSERT_EQ(pipe(report), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(report[0]);
    const std::string squatted = "/dev/shm/gpumem." + std::to_string(getpid()) + ".0";
    write_file(squatted, "x", 1);  // root's file, under the child's own name
    chmod(squatted.c_str(), 0644);
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(3);
    std::string answer;
    try {
      SimulatedDevice device;
      CachingAllocator allocator(simulated_upstream(device));
      StatsPublisher publisher(allocator, {.interval = 1h, .device = 0});
      const bool found = !read_published_stats({.prefix = publisher.name().substr(1)}).empty();
      answer = publisher.name() + (found ? " read" : " unread");
    } catch (const std::exception& e) {
      answer = std::string("error ") + e.what();
    }
    (void)write(report[1], answer.data(), answer.size());
    _exit(0);
  }
  close(report[1]);
  char buffer[512] = {};
  const ssize_t n = read(report[0], buffer, sizeof buffer - 1);
  close(report[0]);
  int status = 0;
  waitpid(child, &status, 0);
  unlink(("/dev/shm/gpumem." + std::to_string(child) + ".0").c_str());
  ASSERT_GT(n, 0);
  const std::string answer(buffer, static_cast<size_t>(n));
  EXPECT_EQ(answer.rfind("/gpumem." + std::to_string(child) + ".0.", 0), 0u) << answer;
  EXPECT_NE(answer.find(" read"), std::string::npos) << answer;
}

}  // namespace
}  // namespace gpumem::alloc
