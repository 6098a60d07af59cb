// Any trace as Chrome trace JSON, which the Perfetto UI (ui.perfetto.dev)
// and chrome://tracing open: per device (a process), counters of allocated
// and reserved bytes, one span per allocation from its allocation to its
// free, and the trace's segment and out-of-memory events as instants.
//
// Written as it goes (no document tree); numbers are exact: times are
// microseconds with three decimals (the trace's nanoseconds), addresses
// hex strings (JSON viewers read numbers as doubles, which would round
// addresses past 2^53).
#include <algorithm>
#include <cstdint>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "gpumem/trace/lifetimes.h"
#include "gpumem/trace/perfetto_writer.h"
#include "trace/json_text.h"

namespace gpumem::trace {
namespace {

class JsonOut {
 public:
  explicit JsonOut(std::ostream& out) : out_(out) {}
  ~JsonOut() { flush(); }
  JsonOut(const JsonOut&) = delete;
  JsonOut& operator=(const JsonOut&) = delete;

  // Starts the next element of the traceEvents array.
  std::string& event() {
    if (buffer_.size() > (1u << 16)) flush();
    buffer_ += first_ ? "\n" : ",\n";
    first_ = false;
    return buffer_;
  }
  std::string& raw() { return buffer_; }
  void flush() {
    out_.write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    buffer_.clear();
  }

 private:
  std::ostream& out_;
  std::string buffer_;
  bool first_ = true;
};

// Nanoseconds as microseconds with three decimals, exactly.
void append_us(std::string& out, std::int64_t ns) {
  const std::uint64_t magnitude = ns < 0 ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  fmt::format_to(std::back_inserter(out), "{}{}.{:03}", ns < 0 ? "-" : "", magnitude / 1000, magnitude % 1000);
}

bool is_segment_or_oom(Action a) {
  return a == Action::kSegmentAlloc || a == Action::kSegmentFree || a == Action::kSegmentMap ||
         a == Action::kSegmentUnmap || a == Action::kOom;
}

// Puts allocations on lanes (threads in the viewer) so that every lane's
// spans nest, as the Chrome format needs: a span goes on the first lane
// where it starts after that lane's open spans ended or lies inside the
// innermost one. Training's LIFO lifetimes need few lanes.
struct Interval {
  std::int64_t start;
  std::int64_t end;
  std::size_t allocation;
};
std::vector<std::size_t> assign_lanes(std::vector<Interval>& spans) {
  std::sort(spans.begin(), spans.end(), [](const Interval& a, const Interval& b) {
    if (a.start != b.start) return a.start < b.start;
    if (a.end != b.end) return a.end > b.end;
    return a.allocation < b.allocation;
  });
  std::vector<std::vector<std::int64_t>> lanes;  // each lane's open span ends, innermost last
  std::vector<std::size_t> lane_of(spans.size());
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const Interval& s = spans[i];
    std::size_t lane = 0;
    for (; lane < lanes.size(); ++lane) {
      std::vector<std::int64_t>& open = lanes[lane];
      while (!open.empty() && open.back() <= s.start) open.pop_back();
      if (open.empty() || s.end <= open.back()) break;
    }
    if (lane == lanes.size()) lanes.emplace_back();
    lanes[lane].push_back(s.end);
    lane_of[i] = lane;
  }
  return lane_of;
}

void write_device(const Trace& trace, std::int32_t device, int pid, const std::vector<std::int64_t>& time,
                  std::int64_t end_time, const std::vector<std::string>& labels, JsonOut& writer) {
  const std::vector<Event>& events = trace.events;
  auto it = [&](std::string& s) { return std::back_inserter(s); };
  {
    std::string& s = writer.event();
    fmt::format_to(it(s), R"({{"ph":"M","name":"process_name","pid":{},"args":{{"name":)", pid);
    detail::append_json_string(s, device_name(device));
    s += "}}";
    fmt::format_to(it(writer.event()),
                   R"({{"ph":"M","name":"process_sort_index","pid":{},"args":{{"sort_index":{}}}}})", pid, pid);
  }

  // Allocated bytes as trace stats count them: the baseline, then +size at
  // each allocation and -size at its free (the same figure as its peak).
  const Lifetimes lifetimes = extract_lifetimes(trace, device, false);
  std::vector<std::int64_t> delta(events.size(), 0);
  for (const Allocation& a : lifetimes.allocations) {
    delta[a.alloc_event] += a.size;
    if (a.free_event != kNeverFreed) delta[a.free_event] -= a.size;
  }
  for (auto [event, bytes] : lifetimes.baseline_frees) delta[event] -= bytes;
  auto counter = [&](const char* name, std::size_t event, std::int64_t bytes) {
    std::string& s = writer.event();
    fmt::format_to(it(s), R"({{"ph":"C","name":"{}","pid":{},"tid":0,"ts":)", name, pid);
    append_us(s, time[event]);
    fmt::format_to(it(s), R"(,"args":{{"bytes":{}}}}})", bytes);
  };
  std::int64_t live = lifetimes.baseline;
  bool started = false;
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (events[i].device != device) continue;
    if (!started) counter("allocated", i, live);  // the baseline, at the first event
    started = true;
    if (delta[i] == 0) continue;
    live += delta[i];
    counter("allocated", i, live);
  }

  // Reserved bytes: the source's own figure when it has one, else the sum
  // of segment events.
  bool source_reserved = false, segments = false;
  for (const Event& e : events) {
    if (e.device != device) continue;
    source_reserved |= e.total_reserved != kUnknown;
    segments |= e.action == Action::kSegmentAlloc || e.action == Action::kSegmentMap;
  }
  std::int64_t reserved = 0, shown = -1;
  for (std::size_t i = 0; i < events.size() && (source_reserved || segments); ++i) {
    const Event& e = events[i];
    if (e.device != device) continue;
    if (source_reserved) {
      if (e.total_reserved == kUnknown) continue;
      reserved = e.total_reserved;
    } else if (e.action == Action::kSegmentAlloc || e.action == Action::kSegmentMap) {
      reserved += e.size;
    } else if (e.action == Action::kSegmentFree || e.action == Action::kSegmentUnmap) {
      reserved -= e.size;
    }
    if (reserved != shown) counter("reserved", i, reserved);
    shown = reserved;
  }

  // Allocation spans, per stream, on nesting lanes.
  std::map<std::uint64_t, std::vector<Interval>> by_stream;
  for (std::size_t k = 0; k < lifetimes.allocations.size(); ++k) {
    const Allocation& a = lifetimes.allocations[k];
    const std::int64_t start = time[a.alloc_event];
    const std::int64_t end = a.free_event == kNeverFreed ? end_time : time[a.free_event];
    by_stream[a.stream].push_back({start, std::max(start, end), k});
  }
  int tid = 1;
  for (auto& [stream, spans] : by_stream) {
    const std::vector<std::size_t> lane_of = assign_lanes(spans);
    const std::size_t lanes = spans.empty() ? 0 : *std::max_element(lane_of.begin(), lane_of.end()) + 1;
    for (std::size_t lane = 0; lane < lanes; ++lane) {
      std::string& s = writer.event();
      fmt::format_to(it(s), R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":)", pid,
                     tid + static_cast<int>(lane));
      detail::append_json_string(
          s, lane == 0 ? fmt::format("stream {:#x}", stream) : fmt::format("stream {:#x} ({})", stream, lane + 1));
      s += "}}";
      fmt::format_to(it(writer.event()),
                     R"({{"ph":"M","name":"thread_sort_index","pid":{},"tid":{},"args":{{"sort_index":{}}}}})", pid,
                     tid + static_cast<int>(lane), tid + static_cast<int>(lane));
    }
    for (std::size_t i = 0; i < spans.size(); ++i) {
      const Allocation& a = lifetimes.allocations[spans[i].allocation];
      const std::string& label = a.context < labels.size() ? labels[a.context] : labels[0];
      std::string& s = writer.event();
      s += R"({"ph":"X","cat":"allocation","name":)";
      detail::append_json_string(s, label.empty() ? std::string_view("allocation") : std::string_view(label));
      fmt::format_to(it(s), R"(,"pid":{},"tid":{},"ts":)", pid, tid + static_cast<int>(lane_of[i]));
      append_us(s, spans[i].start);
      s += ",\"dur\":";
      append_us(s, spans[i].end - spans[i].start);
      fmt::format_to(it(s), R"(,"args":{{"size":{},"address":"{:#x}")", a.size, a.address);
      if (!label.empty()) {
        s += ",\"tag\":";
        detail::append_json_string(s, label);
      }
      if (a.free_event == kNeverFreed) s += ",\"freed\":false";
      s += "}}";
    }
    tid += static_cast<int>(std::max<std::size_t>(lanes, 1));
  }

  // The trace's own segment and out-of-memory events.
  for (std::size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    if (e.device != device || !is_segment_or_oom(e.action)) continue;
    std::string& s = writer.event();
    fmt::format_to(it(s), R"({{"ph":"i","s":"p","name":"{}","pid":{},"tid":0,"ts":)", action_name(e.action), pid);
    append_us(s, time[i]);
    fmt::format_to(it(s), R"(,"args":{{"size":{},"address":"{:#x}","stream":"{:#x}"}}}})", e.size, e.address, e.stream);
  }
}

}  // namespace

void write_perfetto(const Trace& trace, std::ostream& out) {
  const std::vector<Event>& events = trace.events;
  // Times: the trace's own when every event has one; otherwise one
  // microsecond per event, so the order still shows.
  const bool timed = std::all_of(events.begin(), events.end(), [](const Event& e) { return e.time_ns != kUnknown; });
  std::vector<std::int64_t> time(events.size());
  std::int64_t end_time = 0;
  for (std::size_t i = 0; i < events.size(); ++i) {
    time[i] = timed ? events[i].time_ns : static_cast<std::int64_t>(i) * 1000;
    end_time = i == 0 ? time[i] : std::max(end_time, time[i]);
  }
  std::vector<std::string> labels(trace.contexts.size());
  for (std::size_t i = 1; i < trace.contexts.size(); ++i) labels[i] = trace.contexts[i].label();
  if (labels.empty()) labels.emplace_back();

  std::set<std::int32_t> devices;
  for (const Event& e : events) devices.insert(e.device);
  JsonOut doc(out);
  // "writer" tells gpumem's readers this is a picture, not a recording.
  doc.raw() += R"({"displayTimeUnit":"ns","otherData":{"writer":"gpumem-perfetto","source":)";
  detail::append_json_string(doc.raw(), trace.source);
  doc.raw() += ",\"format\":";
  detail::append_json_string(doc.raw(), trace.format);
  doc.raw() += "},\"traceEvents\":[";
  int pid = 1;
  for (std::int32_t device : devices) write_device(trace, device, pid++, time, end_time, labels, doc);
  doc.raw() += "\n]}\n";
  doc.flush();
}

}  // namespace gpumem::trace
