// The CUDA backends and the PyTorch plugin. Every test that needs a device
// skips, saying why, where none is usable (CI has none); the no-device tests
// check that this is said clearly instead.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/types.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "gpumem/alloc/caching_allocator.h"
#include "gpumem/alloc/cuda.h"

#if GPUMEM_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace gpumem::alloc {
namespace {

#define SKIP_WITHOUT_DEVICE() \
  if (auto why = cuda_unavailable_reason(); !why.empty()) GTEST_SKIP() << why

constexpr std::size_t kMiB = std::size_t{1} << 20;

bool aligned(const void* ptr, std::size_t alignment) {
  return reinterpret_cast<std::uintptr_t>(ptr) % alignment == 0;
}

// Fills device memory with `value` through the runtime and reads it back.
::testing::AssertionResult device_round_trip(void* ptr, std::size_t bytes, unsigned char value) {
#if GPUMEM_HAVE_CUDA
  if (cudaError_t status = cudaMemset(ptr, value, bytes); status != cudaSuccess) {
    return ::testing::AssertionFailure() << "cudaMemset: " << cudaGetErrorString(status);
  }
  std::vector<unsigned char> host(bytes);
  if (cudaError_t status = cudaMemcpy(host.data(), ptr, bytes, cudaMemcpyDeviceToHost); status != cudaSuccess) {
    return ::testing::AssertionFailure() << "cudaMemcpy: " << cudaGetErrorString(status);
  }
  for (std::size_t i = 0; i < bytes; ++i) {
    if (host[i] != value) return ::testing::AssertionFailure() << "byte " << i << " reads " << int{host[i]};
  }
  return ::testing::AssertionSuccess();
#else
  (void)ptr, (void)bytes, (void)value;
  return ::testing::AssertionFailure() << "built without CUDA";
#endif
}

std::size_t free_device_memory() {
#if GPUMEM_HAVE_CUDA
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  EXPECT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  return free_bytes;
#else
  return 0;
#endif
}

std::size_t total_device_memory() {
#if GPUMEM_HAVE_CUDA
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  EXPECT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  return total_bytes;
#else
  return 0;
#endif
}

// Takes all but `keep` bytes of the device with one cudaMalloc, so that out
// of memory comes after a few granules or segments instead of after mapping
// the whole device (140 GiB on an H200, granule by granule).
class Hog {
 public:
  Hog(CudaDeviceResource& resource, std::size_t keep) : resource_(resource) {
    const std::size_t free_bytes = free_device_memory();
    bytes_ = free_bytes > 2 * keep ? (free_bytes - keep) / kMiB * kMiB : 0;
    ptr_ = bytes_ > 0 ? resource_.allocate(bytes_) : nullptr;
  }
  ~Hog() { resource_.deallocate(ptr_, bytes_); }
  Hog(const Hog&) = delete;
  Hog& operator=(const Hog&) = delete;

 private:
  CudaDeviceResource& resource_;
  std::size_t bytes_ = 0;
  void* ptr_ = nullptr;
};

// The runtime's last-error state is clean: a failure we turned into an
// exception must not linger for the caller's next cudaGetLastError().
bool no_pending_cuda_error() {
#if GPUMEM_HAVE_CUDA
  return cudaGetLastError() == cudaSuccess;
#else
  return true;
#endif
}

// A stream of our own, so that tests cover streams other than the default.
class Stream {
 public:
  Stream() {
#if GPUMEM_HAVE_CUDA
    EXPECT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
#endif
  }
  ~Stream() {
#if GPUMEM_HAVE_CUDA
    cudaStreamDestroy(stream_);
#endif
  }
  StreamId id() const { return reinterpret_cast<StreamId>(stream_); }
  void synchronize() const {
#if GPUMEM_HAVE_CUDA
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
#endif
  }

 private:
#if GPUMEM_HAVE_CUDA
  cudaStream_t stream_ = nullptr;
#else
  void* stream_ = nullptr;
#endif
};

// --- Without a device ------------------------------------------------------

TEST(CudaUnavailable, ReasonIsGivenAndConstructorsThrow) {
  const std::string why = cuda_unavailable_reason();
  if (why.empty()) GTEST_SKIP() << "a CUDA device is usable here; this test covers machines without one";
  EXPECT_NE(why.find("CUDA"), std::string::npos) << why;
  EXPECT_EQ(why.find('\n'), std::string::npos) << "one line: " << why;
  try {
    CudaDeviceResource resource;
    FAIL() << "CudaDeviceResource was constructed without a usable device";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("CudaDeviceResource"), std::string::npos) << e.what();
  }
  EXPECT_THROW(CudaAsyncPoolResource{}, DeviceError);
  EXPECT_THROW(PinnedHostResource{}, DeviceError);
  EXPECT_THROW(CudaVirtualMemory{}, DeviceError);
  EXPECT_THROW(CudaEvents{}, DeviceError);
  // (No check of cudaGetLastError() here: without a driver every runtime
  // call, that one included, answers the initialization error again.)
}

TEST(CudaUnavailable, BuildFlagMatches) {
#if GPUMEM_HAVE_CUDA
  EXPECT_TRUE(built_with_cuda());
#else
  EXPECT_FALSE(built_with_cuda());
  EXPECT_NE(cuda_unavailable_reason().find("built without CUDA"), std::string::npos);
#endif
}

// --- cudaMalloc ------------------------------------------------------------

TEST(CudaDeviceResource, AllocatesWritableAlignedMemory) {
  SKIP_WITHOUT_DEVICE();
  CudaDeviceResource resource;
  EXPECT_GT(resource.total_memory(), 0u);
  EXPECT_EQ(resource.allocate(0), nullptr);
  for (std::size_t bytes : {std::size_t{1}, std::size_t{1000}, 3 * kMiB + 7}) {
    void* ptr = resource.allocate(bytes);
    ASSERT_NE(ptr, nullptr);
    EXPECT_TRUE(aligned(ptr, kDeviceAlignment));
    EXPECT_TRUE(device_round_trip(ptr, bytes, 0x5a));
    resource.deallocate(ptr, bytes);
  }
}

TEST(CudaDeviceResource, OutOfMemoryExplainsAndLeavesNoError) {
  SKIP_WITHOUT_DEVICE();
  CudaDeviceResource resource;
  const std::size_t bytes = 2 * resource.total_memory();
  try {
    resource.allocate(bytes);
    FAIL() << "allocated twice the device's memory";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.requested_bytes(), bytes);
    const std::string what = e.what();
    EXPECT_NE(what.find("cudaMalloc("), std::string::npos) << what;
    EXPECT_NE(what.find("free "), std::string::npos) << what;
  }
  EXPECT_TRUE(no_pending_cuda_error());
  void* ptr = resource.allocate(kMiB);  // still usable
  EXPECT_TRUE(device_round_trip(ptr, kMiB, 1));
  resource.deallocate(ptr, kMiB);
}

TEST(CudaDeviceResource, RejectsMissingDevice) {
  SKIP_WITHOUT_DEVICE();
  try {
    CudaDeviceResource resource(1000);
    FAIL() << "device 1000 accepted";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("device 1000 does not exist"), std::string::npos) << e.what();
  }
}

// --- cudaMallocFromPoolAsync -----------------------------------------------

TEST(CudaAsyncPoolResource, AllocatesInStreamOrder) {
  SKIP_WITHOUT_DEVICE();
  CudaAsyncPoolResource resource(64 * kMiB);
  Stream stream;
  void* ptr = resource.allocate(5 * kMiB, stream.id());
  ASSERT_NE(ptr, nullptr);
  EXPECT_TRUE(aligned(ptr, kDeviceAlignment));
  stream.synchronize();  // the default stream uses it below
  EXPECT_TRUE(device_round_trip(ptr, 5 * kMiB, 0x33));
  resource.deallocate(ptr, 5 * kMiB, stream.id());
  stream.synchronize();
  EXPECT_THROW(resource.allocate(2 * total_device_memory(), stream.id()), OutOfMemoryError);
  EXPECT_TRUE(no_pending_cuda_error());
}

// --- cudaMallocHost --------------------------------------------------------

TEST(PinnedHostResource, AllocatesPinnedHostMemory) {
  SKIP_WITHOUT_DEVICE();
  PinnedHostResource resource;
  const std::size_t bytes = 64 * 1024;
  auto* ptr = static_cast<unsigned char*>(resource.allocate(bytes));
  ASSERT_NE(ptr, nullptr);
  EXPECT_TRUE(aligned(ptr, kDeviceAlignment));
  std::memset(ptr, 0x7e, bytes);  // host memory: the host writes it directly
  EXPECT_EQ(ptr[bytes - 1], 0x7e);
#if GPUMEM_HAVE_CUDA
  cudaPointerAttributes attributes{};
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, ptr), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost);
#endif
  resource.deallocate(ptr, bytes);
}

// --- Virtual memory --------------------------------------------------------

TEST(CudaVirtualMemory, ReserveMapUnmapRelease) {
  SKIP_WITHOUT_DEVICE();
  CudaVirtualMemory vmm;
  const std::size_t g = vmm.granularity();
  ASSERT_GT(g, 0u);
  EXPECT_EQ(g & (g - 1), 0u) << "granularity " << g << " is not a power of two";
  EXPECT_GT(vmm.physical_capacity(), 0u);

  const std::uintptr_t base = vmm.reserve(4 * g);
  ASSERT_NE(base, 0u);
  EXPECT_EQ(base % g, 0u);
  vmm.map(base + g, 2 * g);
  auto* middle = reinterpret_cast<void*>(base + g);
  EXPECT_TRUE(device_round_trip(middle, 2 * g, 0xa5));
  // Granules are independent: unmap one, the other keeps its contents.
  vmm.unmap(base + g, g);
#if GPUMEM_HAVE_CUDA
  unsigned char byte = 0;
  ASSERT_EQ(cudaMemcpy(&byte, reinterpret_cast<void*>(base + 2 * g), 1, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(byte, 0xa5);
#endif
  vmm.unmap(base + 2 * g, g);
  vmm.map(base, 4 * g);  // the whole range maps again
  EXPECT_TRUE(device_round_trip(reinterpret_cast<void*>(base), 4 * g, 0x11));
  vmm.unmap(base, 4 * g);
  vmm.release(base, 4 * g);
  EXPECT_TRUE(no_pending_cuda_error());
}

TEST(CudaVirtualMemory, RefusesMisuse) {
  SKIP_WITHOUT_DEVICE();
  CudaVirtualMemory vmm;
  const std::size_t g = vmm.granularity();
  EXPECT_THROW(vmm.reserve(g + 1), DeviceError);
  const std::uintptr_t base = vmm.reserve(2 * g);
  EXPECT_THROW(vmm.map(base + 1, g), DeviceError);
  EXPECT_THROW(vmm.unmap(base, g), DeviceError);  // nothing mapped yet
  vmm.map(base, g);
  EXPECT_THROW(vmm.map(base, 2 * g), DeviceError);  // first granule taken
  EXPECT_THROW(vmm.release(base, 2 * g), DeviceError);  // still mapped
  vmm.unmap(base, g);
  vmm.release(base, 2 * g);
}

TEST(CudaVirtualMemory, OutOfMemoryRollsBack) {
  SKIP_WITHOUT_DEVICE();
  CudaVirtualMemory vmm;
  CudaDeviceResource filler;
  const std::size_t g = vmm.granularity();
  Hog hog(filler, 64 * kMiB);
  const std::size_t before = free_device_memory();
  const std::size_t bytes = (before / g + 16) * g;
  const std::uintptr_t base = vmm.reserve(bytes);
  try {
    vmm.map(base, bytes);
    FAIL() << "mapped more than the device has free";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.requested_bytes(), bytes);
    EXPECT_NE(std::string(e.what()).find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos) << e.what();
  }
  // Everything mapped before the failure was given back.
  EXPECT_GE(free_device_memory() + g, before);
  vmm.map(base, g);
  EXPECT_TRUE(device_round_trip(reinterpret_cast<void*>(base), g, 9));
  vmm.unmap(base, g);
  vmm.release(base, bytes);
  EXPECT_TRUE(no_pending_cuda_error());
}

// --- Events ----------------------------------------------------------------

TEST(CudaEvents, RecordQuerySynchronizeReuse) {
  SKIP_WITHOUT_DEVICE();
  CudaEvents events;
  CudaDeviceResource resource;
  Stream stream;
  const std::size_t bytes = 256 * kMiB;
  void* ptr = resource.allocate(bytes);
#if GPUMEM_HAVE_CUDA
  // Queued work for the event to wait on.
  ASSERT_EQ(cudaMemsetAsync(ptr, 0, bytes, reinterpret_cast<cudaStream_t>(stream.id())), cudaSuccess);
#endif
  const EventBackend::Event event = events.record(stream.id());
  events.query(event);  // either answer is right while the memset runs
  events.synchronize(event);
  EXPECT_TRUE(events.query(event));
  events.destroy(event);
  // Destroyed events are kept and handed out again.
  const EventBackend::Event again = events.record(kDefaultStream);
  EXPECT_EQ(again, event);
  events.synchronize(again);
  EXPECT_TRUE(events.query(again));
  events.destroy(again);
  resource.deallocate(ptr, bytes);
  EXPECT_TRUE(no_pending_cuda_error());
}

// --- The caching allocator over CUDA ---------------------------------------

void exercise_caching_allocator(bool expandable) {
  CudaDeviceResource memory;
  std::unique_ptr<CudaVirtualMemory> vmm;
  if (expandable) vmm = std::make_unique<CudaVirtualMemory>();
  CudaEvents events;
  AllocatorConfig config = AllocatorConfig::gpumem_defaults();
  config.expandable_segments = expandable;
  CachingAllocator allocator(Upstream{&memory, vmm.get(), &events, memory.total_memory()}, config);
  Stream side;

  for (std::size_t bytes : {std::size_t{100}, 3 * kMiB, 30 * kMiB}) {
    SCOPED_TRACE("bytes " + std::to_string(bytes));
    void* ptr = allocator.allocate(bytes);
    ASSERT_NE(ptr, nullptr);
    EXPECT_TRUE(aligned(ptr, kDeviceAlignment));
    EXPECT_TRUE(device_round_trip(ptr, bytes, 0x42));
    EXPECT_EQ(allocator.free(ptr, kDefaultStream), FreeStatus::kOk);
    // Cached, so the same request gets the same memory back.
    void* again = allocator.allocate(bytes);
    EXPECT_EQ(again, ptr);
    EXPECT_EQ(allocator.free(again, kDefaultStream), FreeStatus::kOk);
  }

  // A free from another stream waits for that stream's work.
  void* ptr = allocator.allocate(2 * kMiB);
  ASSERT_NE(ptr, nullptr);
  EXPECT_EQ(allocator.free(ptr, side.id()), FreeStatus::kOk);
  side.synchronize();

  EXPECT_GT(allocator.stats().reserved_bytes[kStatAll].current, 0);
  allocator.empty_cache();
  const AllocatorStats stats = allocator.stats();
  EXPECT_EQ(stats.reserved_bytes[kStatAll].current, 0);
  EXPECT_EQ(stats.allocated_bytes[kStatAll].current, 0);

  {
    Hog hog(memory, 64 * kMiB);
    EXPECT_THROW(allocator.allocate(256 * kMiB), OutOfMemoryError);
  }
  allocator.empty_cache();
  EXPECT_EQ(allocator.stats().reserved_bytes[kStatAll].current, 0);
  EXPECT_TRUE(no_pending_cuda_error());
}

TEST(CachingAllocatorOnCuda, Segments) {
  SKIP_WITHOUT_DEVICE();
  exercise_caching_allocator(false);
}

TEST(CachingAllocatorOnCuda, ExpandableSegments) {
  SKIP_WITHOUT_DEVICE();
  exercise_caching_allocator(true);
}

// --- libgpumem_torch.so, loaded as Python loads it -------------------------

#ifdef GPUMEM_TORCH_PLUGIN
// The build's plugin, or $GPUMEM_TORCH_PLUGIN where the tests run away from
// the build tree (scripts/gpu_check.sh carries them to a GPU machine).
const char* plugin_path() {
  const char* path = std::getenv("GPUMEM_TORCH_PLUGIN");
  return path != nullptr && *path != '\0' ? path : GPUMEM_TORCH_PLUGIN;
}

struct Plugin {
  void* handle = dlopen(plugin_path(), RTLD_NOW | RTLD_LOCAL);
  ~Plugin() {
    if (handle != nullptr) dlclose(handle);
  }
  template <typename F>
  F* get(const char* name) const {
    return reinterpret_cast<F*>(dlsym(handle, name));
  }
};

using AllocFn = void*(ssize_t, int, void*);
using FreeFn = void(void*, ssize_t, int, void*);
using JsonFn = long(int, char*, std::size_t);
using SummaryFn = const char*(int);
using EmptyCacheFn = void();

std::string stats_json(const Plugin& plugin, int device) {
  auto* fn = plugin.get<JsonFn>("gpumem_torch_memory_stats_json");
  const long n = fn(device, nullptr, 0);
  if (n < 0) return "";
  std::string text(static_cast<std::size_t>(n) + 1, '\0');
  fn(device, text.data(), text.size());
  text.pop_back();
  return text;
}

TEST(TorchPlugin, ExportsEntryPoints) {
  Plugin plugin;
  ASSERT_NE(plugin.handle, nullptr) << plugin_path() << ": " << dlerror();
  for (const char* name : {"gpumem_torch_alloc", "gpumem_torch_free", "gpumem_torch_empty_cache",
                           "gpumem_torch_memory_stats_json", "gpumem_torch_memory_snapshot_json",
                           "gpumem_torch_memory_summary", "gpumem_torch_reset_peak_stats", "gpumem_torch_record_stream",
                           "gpumem_torch_config"}) {
    EXPECT_NE(dlsym(plugin.handle, name), nullptr) << name;
  }
  // Before any allocation there is nothing to report, device or not.
  EXPECT_EQ(stats_json(plugin, 0), "{}");
}

TEST(TorchPlugin, AllocationFailureThrowsBadAlloc) {
  Plugin plugin;
  ASSERT_NE(plugin.handle, nullptr) << plugin_path() << ": " << dlerror();
  auto* alloc = plugin.get<AllocFn>("gpumem_torch_alloc");
  // Device 64 is out of range everywhere, so this runs without a GPU too.
  try {
    alloc(1024, 64, nullptr);
    FAIL() << "allocated on device 64";
  } catch (const std::bad_alloc& e) {
    EXPECT_NE(std::string(e.what()).find("gpumem_torch_alloc(1024 bytes, device 64)"), std::string::npos) << e.what();
  }
}

// GPUMEM_ALLOC_CONF is validated as the C++ and C APIs validate configs,
// before any CUDA call: this runs without a GPU too. The config parses, but
// a 64 MiB shared segment could never be split under a 32 MiB max_split_size.
TEST(TorchPlugin, InvalidConfigIsRefusedWithTheField) {
  Plugin plugin;
  ASSERT_NE(plugin.handle, nullptr) << plugin_path() << ": " << dlerror();
  ::setenv("GPUMEM_ALLOC_CONF", "large_segment_mb:64,max_split_size_mb:32", 1);
  // Device 63: in range, and used by no other test, so its allocator is made here.
  try {
    plugin.get<AllocFn>("gpumem_torch_alloc")(1024, 63, nullptr);
    FAIL() << "allocated under an invalid config";
  } catch (const std::bad_alloc& e) {
    EXPECT_NE(std::string(e.what()).find("max_split_size_mb is 33554432 bytes"), std::string::npos) << e.what();
  }
  EXPECT_EQ(plugin.get<const char*()>("gpumem_torch_config")(), nullptr);
  ::unsetenv("GPUMEM_ALLOC_CONF");
}

TEST(TorchPlugin, AllocatesAndEmptiesCache) {
  SKIP_WITHOUT_DEVICE();
  Plugin plugin;
  ASSERT_NE(plugin.handle, nullptr) << plugin_path() << ": " << dlerror();
  auto* alloc = plugin.get<AllocFn>("gpumem_torch_alloc");
  auto* free_fn = plugin.get<FreeFn>("gpumem_torch_free");
  int device = 0;
#if GPUMEM_HAVE_CUDA
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
#endif
  void* ptr = alloc(static_cast<ssize_t>(4 * kMiB), device, nullptr);
  ASSERT_NE(ptr, nullptr);
  EXPECT_TRUE(device_round_trip(ptr, 4 * kMiB, 0x24));
  EXPECT_NE(stats_json(plugin, device).find("\"allocated_bytes.all.current\":4194304"), std::string::npos)
      << stats_json(plugin, device);
  free_fn(ptr, static_cast<ssize_t>(4 * kMiB), device, nullptr);
  const char* summary = plugin.get<SummaryFn>("gpumem_torch_memory_summary")(device);
  ASSERT_NE(summary, nullptr);
  EXPECT_GT(std::strlen(summary), 0u);
  plugin.get<EmptyCacheFn>("gpumem_torch_empty_cache")();
  EXPECT_NE(stats_json(plugin, device).find("\"reserved_bytes.all.current\":0"), std::string::npos)
      << stats_json(plugin, device);
  try {
    alloc(static_cast<ssize_t>(std::size_t{1} << 50), device, nullptr);
    FAIL() << "allocated 1 PiB";
  } catch (const std::bad_alloc& e) {
    EXPECT_NE(std::string(e.what()).find("gpumem_torch_alloc("), std::string::npos) << e.what();
  }
}
#endif  // GPUMEM_TORCH_PLUGIN

}  // namespace
}  // namespace gpumem::alloc
