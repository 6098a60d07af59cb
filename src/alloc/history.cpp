// The allocation history ring buffer and its JSON-lines form.
#include "gpumem/alloc/history.h"
#include "common/bounded_json.h"

#include <chrono>
#include <ostream>

#include <nlohmann/json.hpp>

namespace gpumem::alloc {
namespace {

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

}  // namespace

const char* action_name(HistoryAction action) {
  switch (action) {
    case HistoryAction::kAlloc: return "alloc";
    case HistoryAction::kFreeRequested: return "free_requested";
    case HistoryAction::kFreeCompleted: return "free_completed";
    case HistoryAction::kSegmentAlloc: return "segment_alloc";
    case HistoryAction::kSegmentFree: return "segment_free";
    case HistoryAction::kSegmentMap: return "segment_map";
    case HistoryAction::kSegmentUnmap: return "segment_unmap";
    case HistoryAction::kOom: return "oom";
  }
  return "unknown";
}

TagTable::TagTable() : names_{""} {}

TagId TagTable::intern(std::string_view name) {
  if (name.empty()) return kNoTag;
  std::lock_guard lock(mutex_);
  auto [it, inserted] = ids_.try_emplace(std::string(name), static_cast<TagId>(names_.size()));
  if (inserted) names_.emplace_back(name);
  return it->second;
}

std::string TagTable::name(TagId tag) const {
  std::lock_guard lock(mutex_);
  return tag < names_.size() ? names_[tag] : std::string();
}

History::History(std::size_t capacity) : ring_(capacity), start_ns_(now_ns()) {}

void History::append(HistoryAction action, std::uint64_t address, std::uint64_t size, std::uint64_t requested,
                     StreamId stream, TagId tag) {
  ring_[total_ % ring_.size()] = {action, now_ns() - start_ns_, address, size, requested, stream, tag};
  ++total_;
}

std::vector<HistoryEvent> History::events() const {
  std::vector<HistoryEvent> out;
  if (ring_.empty()) return out;
  std::uint64_t kept = total_ < ring_.size() ? total_ : ring_.size();
  out.reserve(kept);
  for (std::uint64_t i = total_ - kept; i < total_; ++i) out.push_back(ring_[i % ring_.size()]);
  return out;
}

void History::clear() { total_ = 0; }

void write_history_jsonl(std::ostream& out, const std::vector<HistoryEvent>& events, std::uint64_t dropped,
                         const TagTable& tags) {
  nlohmann::json header = {
      {"format", "gpumem-history"}, {"version", 1}, {"events", events.size()}, {"dropped", dropped}};
  out << json_text(header) << '\n';
  for (const HistoryEvent& e : events) {
    nlohmann::json line = {
        {"action", action_name(e.action)}, {"time_ns", e.time_ns}, {"addr", e.address}, {"size", e.size}};
    if (e.action == HistoryAction::kAlloc) line["requested"] = e.requested;
    line["stream"] = e.stream;
    if (e.tag != kNoTag) line["tag"] = tags.name(e.tag);
    out << json_text(line) << '\n';
  }
}

}  // namespace gpumem::alloc
