// TracingAdaptor: every call over any resource, recorded into a History.
#include <mutex>
#include <ostream>

#include "gpumem/alloc/tracing_adaptor.h"

namespace gpumem::alloc {
namespace {

std::uint64_t address_of(const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr); }

}  // namespace

void* TracingAdaptor::allocate_tagged(std::size_t bytes, StreamId stream, TagId tag) {
  void* ptr = nullptr;
  try {
    ptr = upstream_.allocate(bytes, stream);
  } catch (const OutOfMemoryError&) {
    std::lock_guard lock(mutex_);
    history_.record(HistoryAction::kOom, 0, bytes, bytes, stream, tag);
    throw;
  }
  if (ptr == nullptr) return ptr;  // a 0-byte request allocates nothing
  // Recorded after the upstream call and frees before it: an address is
  // then always freed in the trace before another caller is given it.
  std::lock_guard lock(mutex_);
  if (tag != kNoTag) {
    try {
      live_tags_[ptr] = tag;
    } catch (...) {
      upstream_.deallocate(ptr, bytes, stream);
      throw;
    }
  }
  history_.record(HistoryAction::kAlloc, address_of(ptr), bytes, bytes, stream, tag);
  return ptr;
}

void TracingAdaptor::do_deallocate(void* ptr, std::size_t bytes, StreamId stream) noexcept {
  if (ptr != nullptr) {
    std::lock_guard lock(mutex_);
    TagId tag = kNoTag;
    if (auto it = live_tags_.find(ptr); it != live_tags_.end()) {
      tag = it->second;
      live_tags_.erase(it);
    }
    history_.record(HistoryAction::kFreeRequested, address_of(ptr), bytes, bytes, stream, tag);
  }
  upstream_.deallocate(ptr, bytes, stream);
}

std::vector<HistoryEvent> TracingAdaptor::events() const {
  std::lock_guard lock(mutex_);
  return history_.events();
}

std::uint64_t TracingAdaptor::dropped() const {
  std::lock_guard lock(mutex_);
  return history_.dropped();
}

void TracingAdaptor::write_jsonl(std::ostream& out) const {
  std::vector<HistoryEvent> events;
  std::uint64_t dropped = 0;
  {
    std::lock_guard lock(mutex_);
    events = history_.events();
    dropped = history_.dropped();
  }
  write_history_jsonl(out, events, dropped, tags_);
}

void TracingAdaptor::clear() {
  std::lock_guard lock(mutex_);
  history_.clear();
}

}  // namespace gpumem::alloc
