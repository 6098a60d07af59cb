// The adaptors (statistics, byte budget, tracing) and host memory, stacked
// over the simulated GPU and over the host.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpumem/alloc/host_resource.h"
#include "gpumem/alloc/limiting_adaptor.h"
#include "gpumem/alloc/simulated_device.h"
#include "gpumem/alloc/statistics_adaptor.h"
#include "gpumem/alloc/tracing_adaptor.h"
#include "gpumem/common/error.h"

namespace gpumem::alloc {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

TEST(StatisticsAdaptor, CountsThroughALimitOverTheDevice) {
  SimulatedDevice device({.capacity = 64 * kMiB});
  LimitingAdaptor limit(device, kMiB);
  StatisticsAdaptor stats(limit);
  EXPECT_EQ(stats.name(), "statistics(limiting(simulated-device))");
  EXPECT_EQ(stats.alignment(), device.alignment());

  void* a = stats.allocate(1000);
  void* b = stats.allocate(3000, 7);
  EXPECT_EQ(address(a) % device.alignment(), 0u);
  EXPECT_EQ(limit.used(), 1024u + 3072u);  // rounded to the device's 256 bytes
  StatisticsCounters c = stats.counters();
  EXPECT_EQ(c.bytes.current, 4000);  // as requested
  EXPECT_EQ(c.allocations.current, 2);

  stats.deallocate(b, 3000, 7);
  c = stats.counters();
  EXPECT_EQ(c.bytes.current, 1000);
  EXPECT_EQ(c.bytes.peak, 4000);
  EXPECT_EQ(c.bytes.allocated, 4000);
  EXPECT_EQ(c.bytes.freed, 3000);
  EXPECT_EQ(c.allocations.peak, 2);
  EXPECT_EQ(limit.used(), 1024u);

  stats.reset_peak();
  EXPECT_EQ(stats.counters().bytes.peak, 1000);
  EXPECT_EQ(stats.counters().allocations.peak, 1);
  stats.deallocate(a, 1000);
  EXPECT_EQ(stats.counters().bytes.current, 0);
  EXPECT_EQ(limit.used(), 0u);
  EXPECT_EQ(device.counters().live_allocations, 0u);
}

TEST(StatisticsAdaptor, ZeroBytesAllocateNothing) {
  HostResource host;
  StatisticsAdaptor stats(host);
  EXPECT_EQ(stats.allocate(0), nullptr);
  stats.deallocate(nullptr, 0);
  EXPECT_EQ(stats.counters().allocations.allocated, 0);
}

TEST(LimitingAdaptor, RefusesBeyondTheBudgetAndSaysWhy) {
  SimulatedDevice device({.capacity = 64 * kMiB});
  LimitingAdaptor limit(device, 4096);
  void* a = limit.allocate(3000);  // counts 3072
  try {
    (void)limit.allocate(2000);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("limiting(simulated-device)"), std::string::npos) << message;
    EXPECT_NE(message.find("4.00 KiB"), std::string::npos) << message;  // the budget
    EXPECT_NE(message.find("3.00 KiB"), std::string::npos) << message;  // in use
    EXPECT_NE(message.find("1.95 KiB"), std::string::npos) << message;  // the request
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_EQ(e.requested_bytes(), 2000u);
  }
  EXPECT_EQ(limit.used(), 3072u);
  void* b = limit.allocate(1024);  // exactly fills the budget
  EXPECT_EQ(limit.used(), 4096u);
  EXPECT_THROW((void)limit.allocate(1), OutOfMemoryError);
  limit.deallocate(b, 1024);
  limit.deallocate(a, 3000);
  EXPECT_EQ(limit.used(), 0u);
  EXPECT_THROW((void)limit.allocate(SIZE_MAX), OutOfMemoryError);  // rounding would overflow
  EXPECT_EQ(limit.used(), 0u);
}

TEST(LimitingAdaptor, GivesTheBudgetBackWhenTheUpstreamFails) {
  SimulatedDevice device({.capacity = kMiB});
  LimitingAdaptor limit(device, 64 * kMiB);
  EXPECT_THROW((void)limit.allocate(2 * kMiB), OutOfMemoryError);
  EXPECT_EQ(limit.used(), 0u);
}

TEST(TracingAdaptor, RecordsEveryCallInOrder) {
  SimulatedDevice device({.capacity = 64 * kMiB});
  TracingAdaptor trace(device);
  EXPECT_EQ(trace.name(), "tracing(simulated-device)");
  const TagId weights = trace.intern_tag("weights");
  void* a = trace.allocate_tagged(100, 0, weights);
  void* b = trace.allocate(200, 7);
  trace.deallocate(a, 100, 0);
  trace.deallocate(b, 200, 7);

  const std::vector<HistoryEvent> events = trace.events();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].action, HistoryAction::kAlloc);
  EXPECT_EQ(events[0].address, address(a));
  EXPECT_EQ(events[0].tag, weights);
  EXPECT_EQ(events[1].action, HistoryAction::kAlloc);
  EXPECT_EQ(events[1].stream, 7u);
  EXPECT_EQ(events[1].tag, kNoTag);
  EXPECT_EQ(events[2].action, HistoryAction::kFreeRequested);
  EXPECT_EQ(events[2].address, address(a));
  EXPECT_EQ(events[2].tag, weights);  // the free carries the allocation's tag
  EXPECT_EQ(events[3].action, HistoryAction::kFreeRequested);
  EXPECT_EQ(events[3].size, 200u);
  for (std::size_t i = 1; i < events.size(); ++i) EXPECT_LE(events[i - 1].time_ns, events[i].time_ns);
}

TEST(TracingAdaptor, WritesJsonLines) {
  SimulatedDevice device({.capacity = 64 * kMiB});
  TracingAdaptor trace(device);
  void* a = trace.allocate_tagged(100, 3, trace.intern_tag("kv-cache"));
  trace.deallocate(a, 100, 3);

  std::stringstream out;
  trace.write_jsonl(out);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(out, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["format"], "gpumem-history");
  EXPECT_EQ(lines[0]["events"], 2);
  EXPECT_EQ(lines[0]["dropped"], 0);
  EXPECT_EQ(lines[1]["action"], "alloc");
  EXPECT_EQ(lines[1]["addr"], address(a));
  EXPECT_EQ(lines[1]["requested"], 100);
  EXPECT_EQ(lines[1]["stream"], 3);
  EXPECT_EQ(lines[1]["tag"], "kv-cache");
  EXPECT_EQ(lines[2]["action"], "free_requested");
  EXPECT_EQ(lines[2]["tag"], "kv-cache");
  EXPECT_FALSE(lines[2].contains("requested"));
}

TEST(TracingAdaptor, RecordsOutOfMemoryAndRethrows) {
  SimulatedDevice device({.capacity = 64 * kMiB});
  LimitingAdaptor limit(device, 1024);
  TracingAdaptor trace(limit);
  EXPECT_THROW((void)trace.allocate_tagged(4096, 5, trace.intern_tag("activations")), OutOfMemoryError);
  const std::vector<HistoryEvent> events = trace.events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].action, HistoryAction::kOom);
  EXPECT_EQ(events[0].size, 4096u);
  EXPECT_EQ(events[0].stream, 5u);
  EXPECT_EQ(trace.tags().name(events[0].tag), "activations");
}

TEST(TracingAdaptor, KeepsTheLastEventsWhenFull) {
  HostResource host;
  TracingAdaptor trace(host, 2);
  std::vector<void*> ptrs;
  for (int i = 0; i < 3; ++i) ptrs.push_back(trace.allocate(64));
  EXPECT_EQ(trace.events().size(), 2u);
  EXPECT_EQ(trace.dropped(), 1u);
  EXPECT_EQ(trace.events()[1].address, address(ptrs[2]));
  for (void* p : ptrs) trace.deallocate(p, 64);
  trace.clear();
  EXPECT_TRUE(trace.events().empty());
}

TEST(Adaptors, AreThreadSafe) {
  HostResource host;
  LimitingAdaptor limit(host, 64 * kMiB);
  TracingAdaptor trace(limit, 1 << 14);
  StatisticsAdaptor stats(trace);
  constexpr int kThreads = 4;
  constexpr int kRounds = 1000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&stats, t] {
      for (int i = 0; i < kRounds; ++i) {
        const std::size_t bytes = 64 + static_cast<std::size_t>((t * 131 + i * 17) % 4000);
        void* p = stats.allocate(bytes, static_cast<StreamId>(t));
        std::memset(p, t, bytes);
        stats.deallocate(p, bytes, static_cast<StreamId>(t));
      }
    });
  for (std::thread& t : threads) t.join();
  const StatisticsCounters c = stats.counters();
  EXPECT_EQ(c.allocations.current, 0);
  EXPECT_EQ(c.allocations.allocated, kThreads * kRounds);
  EXPECT_EQ(c.bytes.current, 0);
  EXPECT_LE(c.allocations.peak, kThreads);
  EXPECT_EQ(limit.used(), 0u);
  EXPECT_EQ(trace.events().size(), std::size_t{2 * kThreads * kRounds});
}

TEST(HostResource, HandsOutWritableAlignedMemory) {
  HostResource host;
  EXPECT_EQ(host.alignment(), 256u);
  EXPECT_EQ(host.name(), "host");
  for (std::size_t bytes : {1u, 100u, 256u, 1000u, 1u << 20}) {
    auto* p = static_cast<unsigned char*>(host.allocate(bytes));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(address(p) % 256, 0u);
    std::memset(p, 0xab, bytes);
    EXPECT_EQ(p[bytes - 1], 0xab);
    host.deallocate(p, bytes);
  }
  EXPECT_EQ(host.allocate(0), nullptr);

  HostResource page(4096);
  void* p = page.allocate(10);
  EXPECT_EQ(address(p) % 4096, 0u);
  page.deallocate(p, 10);

  HostResource byte(1);  // below what posix_memalign takes: still works
  void* q = byte.allocate(3);
  ASSERT_NE(q, nullptr);
  byte.deallocate(q, 3);
}

TEST(HostResource, ChecksTheAlignment) {
  EXPECT_THROW(HostResource(0), InputError);
  EXPECT_THROW(HostResource(3), InputError);
  EXPECT_THROW(HostResource(4097), InputError);
}

// ASan and TSan abort on absurd sizes instead of failing them.
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
TEST(HostResource, ThrowsOutOfMemory) {
  HostResource host;
  try {
    (void)host.allocate(SIZE_MAX / 2);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.requested_bytes(), SIZE_MAX / 2);
    EXPECT_NE(std::string(e.what()).find("host: cannot allocate"), std::string::npos) << e.what();
  }
}
#endif

}  // namespace
}  // namespace gpumem::alloc
