// The CUDA backends of a build without the CUDA toolkit: they exist so that
// code naming them links everywhere, and their constructors say why they
// cannot work. Nothing but the constructors can run, so the other members
// are unreachable.
#include <string>

#include "gpumem/alloc/cuda.h"

namespace gpumem::alloc {

namespace {

constexpr const char* kReason =
    "gpumem was built without CUDA (the CUDA toolkit was not found at configure time)";

[[noreturn]] void unavailable(const char* who) { throw DeviceError(std::string(who) + ": " + kReason); }

// The destructors below name the fields that only the CUDA build uses, which
// keeps clang's -Wunused-private-field quiet.

}  // namespace

bool built_with_cuda() noexcept { return false; }
std::string cuda_unavailable_reason() { return kReason; }

CudaDeviceResource::CudaDeviceResource(int device) : device_(device) { unavailable("CudaDeviceResource"); }
void* CudaDeviceResource::do_allocate(std::size_t, StreamId) { unavailable("CudaDeviceResource::allocate"); }
void CudaDeviceResource::do_deallocate(void*, std::size_t, StreamId) noexcept {}

CudaAsyncPoolResource::CudaAsyncPoolResource(std::size_t, int device) : device_(device) {
  unavailable("CudaAsyncPoolResource");
}
CudaAsyncPoolResource::~CudaAsyncPoolResource() { (void)device_, (void)pool_; }
void* CudaAsyncPoolResource::do_allocate(std::size_t, StreamId) { unavailable("CudaAsyncPoolResource::allocate"); }
void CudaAsyncPoolResource::do_deallocate(void*, std::size_t, StreamId) noexcept {}

PinnedHostResource::PinnedHostResource() { unavailable("PinnedHostResource"); }
void* PinnedHostResource::do_allocate(std::size_t, StreamId) { unavailable("PinnedHostResource::allocate"); }
void PinnedHostResource::do_deallocate(void*, std::size_t, StreamId) noexcept {}

CudaVirtualMemory::CudaVirtualMemory(int device) : device_(device) { unavailable("CudaVirtualMemory"); }
CudaVirtualMemory::~CudaVirtualMemory() { (void)device_; }
std::uintptr_t CudaVirtualMemory::reserve(std::size_t) { unavailable("CudaVirtualMemory::reserve"); }
void CudaVirtualMemory::release(std::uintptr_t, std::size_t) { unavailable("CudaVirtualMemory::release"); }
void CudaVirtualMemory::map(std::uintptr_t, std::size_t) { unavailable("CudaVirtualMemory::map"); }
void CudaVirtualMemory::unmap(std::uintptr_t, std::size_t) { unavailable("CudaVirtualMemory::unmap"); }

CudaEvents::CudaEvents(int device) : device_(device) { unavailable("CudaEvents"); }
CudaEvents::~CudaEvents() { (void)device_; }
EventBackend::Event CudaEvents::record(StreamId) { unavailable("CudaEvents::record"); }
bool CudaEvents::query(Event) { unavailable("CudaEvents::query"); }
void CudaEvents::synchronize(Event) { unavailable("CudaEvents::synchronize"); }
void CudaEvents::destroy(Event) noexcept {}

}  // namespace gpumem::alloc
