// gpumem's allocator history (JSON lines; src/alloc/history.cpp writes it,
// docs/allocator.md "Statistics, snapshots, history" documents it), read and written.
//
//   {"format":"gpumem-history","version":1,"events":N,"dropped":D[,"allocator":"pytorch"]}
// ("allocator": the policy the events were made under, when not gpumem's own,
// e.g. a step `gpumem train --trace` predicted for PyTorch's allocator)
//   {"action":"alloc","time_ns":T,"addr":A,"size":S,"requested":R,"stream":K,"tag":"name"}
//
// Each line is one flat object, read by a small SAX handler into fixed
// fields (no DOM per line). Tags become contexts. Two keys beyond what the
// allocator writes are read and written for traces from other sources:
// "device" (when not 0) and a missing "time_ns" (time unknown).
#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpumem/common/error.h"
#include "gpumem/trace/formats.h"
#include "gpumem/trace/history_format.h"
#include "trace/json_text.h"
#include "trace/text_lines.h"

namespace gpumem::trace {
namespace {

using json = nlohmann::json;

// One line's object: known keys to typed slots, with what went wrong.
class LineHandler {
 public:
  enum class Key : std::uint8_t {
    kOther,
    kFormat,
    kVersion,
    kEvents,
    kDropped,
    kAllocator,
    kAction,
    kTime,
    kAddr,
    kSize,
    kRequested,
    kStream,
    kTag,
    kDevice
  };
  struct Value {
    bool present = false;
    bool is_string = false;
    bool is_integer = false;
    bool negative = false;
    std::uint64_t magnitude = 0;  // of an integer
    std::string text;             // of a string
  };

  void reset() {
    for (Value& v : values_) v = Value{};
    depth_ = 0;
    nested_ = false;
    key_ = Key::kOther;
    root_object_ = false;
  }
  const Value& operator[](Key k) const { return values_[static_cast<std::size_t>(k)]; }
  bool nested() const { return nested_; }
  bool root_object() const { return root_object_; }

  bool null() {
    return put([](Value&) {});
  }
  bool boolean(bool) {
    return put([](Value&) {});
  }
  bool number_integer(std::int64_t v) {
    return put([&](Value& x) {
      x.is_integer = true;
      x.negative = v < 0;
      x.magnitude = v < 0 ? 0 - static_cast<std::uint64_t>(v) : static_cast<std::uint64_t>(v);
    });
  }
  bool number_unsigned(std::uint64_t v) {
    return put([&](Value& x) {
      x.is_integer = true;
      x.magnitude = v;
    });
  }
  bool number_float(double, const std::string&) {
    return put([](Value&) {});
  }
  bool string(std::string& s) {
    return put([&](Value& x) {
      x.is_string = true;
      x.text = s;
    });
  }
  bool binary(json::binary_t&) {
    return put([](Value&) {});
  }
  bool key(std::string& k) {
    key_ = key_of(k);
    return true;
  }
  bool start_object(std::size_t) {
    if (depth_ == 0)
      root_object_ = true;
    else
      nested_ = true;
    ++depth_;
    return true;
  }
  bool end_object() {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) {
    nested_ = true;
    ++depth_;
    return true;
  }
  bool end_array() {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    error_column_ = position;
    error_ = e.what();
    return false;
  }
  std::size_t error_column() const { return error_column_; }
  const std::string& error() const { return error_; }

 private:
  static Key key_of(std::string_view k) {
    static constexpr std::pair<std::string_view, Key> kKeys[] = {
        {"format", Key::kFormat},       {"version", Key::kVersion},     {"events", Key::kEvents},
        {"dropped", Key::kDropped},     {"allocator", Key::kAllocator}, {"action", Key::kAction},
        {"time_ns", Key::kTime},        {"addr", Key::kAddr},           {"size", Key::kSize},
        {"requested", Key::kRequested}, {"stream", Key::kStream},       {"tag", Key::kTag},
        {"device", Key::kDevice}};
    for (auto [name, key] : kKeys)
      if (k == name) return key;
    return Key::kOther;
  }
  template <typename F>
  bool put(F&& fill) {
    if (depth_ == 1 && key_ != Key::kOther) {
      Value& v = values_[static_cast<std::size_t>(key_)];
      v = Value{};
      v.present = true;
      fill(v);
    }
    return true;
  }

  Value values_[static_cast<std::size_t>(Key::kDevice) + 1];
  int depth_ = 0;
  bool nested_ = false;
  bool root_object_ = false;
  Key key_ = Key::kOther;
  std::size_t error_column_ = 0;
  std::string error_;
};

using Key = LineHandler::Key;

// Why a value cannot be an integer in [min, max]; "" when it can.
std::string integer_problem(const LineHandler::Value& v, const char* key, std::int64_t min, std::uint64_t max,
                            std::int64_t& out) {
  if (!v.present) return fmt::format("no \"{}\"", key);
  if (!v.is_integer) return fmt::format("\"{}\" is not an integer", key);
  if (v.negative ? (min >= 0 || v.magnitude > static_cast<std::uint64_t>(-(min + 1)) + 1) : v.magnitude > max)
    return fmt::format("\"{}\" is out of range", key);
  out = v.negative ? static_cast<std::int64_t>(0 - v.magnitude) : static_cast<std::int64_t>(v.magnitude);
  return "";
}

constexpr std::int64_t kInt64Min = std::numeric_limits<std::int64_t>::min();
constexpr std::uint64_t kInt64Max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());

}  // namespace

Trace read_history(std::string_view data, const std::string& name, const ReadOptions& options) {
  Trace trace;
  trace.format = "gpumem-history";
  trace.source = name;
  const std::string file = printable(name);
  detail::Lines lines(data);
  std::string_view line;
  LineHandler h;

  // Parses one line; "" or the reason it is not a flat JSON object.
  auto parse_line = [&](std::string_view text) -> std::string {
    h.reset();
    if (!json::sax_parse(text.begin(), text.end(), &h, json::input_format_t::json, true)) {
      if (!h.error().empty())
        return fmt::format("invalid JSON at column {}", std::min(h.error_column(), text.size()) + 0);
      return "invalid JSON";
    }
    if (!h.root_object()) return "not a JSON object";
    if (h.nested()) return "nested objects or arrays (events are flat objects)";
    return "";
  };

  while (lines.next(line) && detail::trim(line).empty()) {
  }
  if (lines.number() == 0 || detail::trim(line).empty())
    throw InputError(fmt::format("{}: empty file: no gpumem-history header line", file));
  std::int64_t declared_events = -1, dropped = 0;
  {
    std::string why = parse_line(line);
    const auto& format = h[Key::kFormat];
    if (why.empty() && !(format.is_string && format.text == "gpumem-history")) why = "no \"format\":\"gpumem-history\"";
    std::int64_t version = 0;
    if (why.empty()) why = integer_problem(h[Key::kVersion], "version", 0, kInt64Max, version);
    if (why.empty() && version != 1) why = fmt::format("version {} (this gpumem reads version 1)", version);
    if (why.empty() && h[Key::kEvents].present)
      why = integer_problem(h[Key::kEvents], "events", 0, kInt64Max, declared_events);
    if (why.empty() && h[Key::kDropped].present)
      why = integer_problem(h[Key::kDropped], "dropped", 0, kInt64Max, dropped);
    if (why.empty() && h[Key::kAllocator].present && !h[Key::kAllocator].is_string)
      why = "\"allocator\" is not a string";
    if (!why.empty())
      throw InputError(fmt::format("{}: line {}: not a gpumem history header: {}", file, lines.number(), why));
    trace.recorded_under = h[Key::kAllocator].text;
  }

  detail::SkippedLines skipped(file, options.strict, trace);
  auto problem = [&](const std::string& what) { skipped.skip(lines.number(), what); };
  std::uint64_t lines_read = 0;
  while (lines.next(line)) {
    if (detail::trim(line).empty()) continue;
    ++lines_read;
    if (std::string why = parse_line(line); !why.empty()) {
      problem(why);
      continue;
    }
    Event e;
    const auto& action = h[Key::kAction];
    if (!action.present) {
      problem("no \"action\"");
      continue;
    }
    if (!action.is_string || !parse_action(action.text, &e.action)) {
      problem(fmt::format("unknown action '{}'", printable(action.is_string ? action.text : "(not a string)")));
      continue;
    }
    std::int64_t addr = 0, size = 0, stream = 0, time = kUnknown, device = 0;
    std::string why = integer_problem(h[Key::kAddr], "addr", kInt64Min, UINT64_MAX, addr);
    if (why.empty()) why = integer_problem(h[Key::kSize], "size", 0, kInt64Max, size);
    if (why.empty() && h[Key::kStream].present)
      why = integer_problem(h[Key::kStream], "stream", kInt64Min, UINT64_MAX, stream);
    if (why.empty() && h[Key::kTime].present)
      why = integer_problem(h[Key::kTime], "time_ns", kInt64Min, kInt64Max, time);
    if (why.empty() && h[Key::kDevice].present)
      why = integer_problem(h[Key::kDevice], "device", std::numeric_limits<std::int32_t>::min(),
                            std::numeric_limits<std::int32_t>::max(), device);
    const auto& tag = h[Key::kTag];
    if (why.empty() && tag.present && !tag.is_string) why = "\"tag\" is not a string";
    if (!why.empty()) {
      problem(why);
      continue;
    }
    // Addresses and streams are unsigned 64-bit; negative ones are taken
    // as their two's complement (what a signed writer would have meant).
    e.address = static_cast<std::uint64_t>(addr);
    e.stream = static_cast<std::uint64_t>(stream);
    e.size = size;
    e.time_ns = time;
    e.device = static_cast<std::int32_t>(device);
    if (tag.present && !tag.text.empty()) e.context = trace.intern(Context{tag.text, {}});
    trace.events.push_back(e);
  }
  skipped.finish();
  if (declared_events >= 0 && lines_read != static_cast<std::uint64_t>(declared_events)) {
    std::string what = fmt::format("{}: line {}: the header announces {} events but the file has {}", file,
                                   lines.number(), declared_events, lines_read);
    if (options.strict) throw InputError(what + " (truncated?)");
    trace.warnings.push_back(what);
  }
  if (dropped > 0)
    trace.warnings.push_back(fmt::format(
        "{}: line 1: the allocator's ring buffer dropped the {} oldest events; frees of what they allocated look "
        "unknown",
        file, dropped));
  return trace;
}

void write_history(const Trace& trace, std::ostream& out) {
  // Snapshots are not allocator actions: the format's readers do not know them.
  std::size_t count = 0;
  for (const Event& e : trace.events) count += e.action != Action::kSnapshot;
  std::string buffer = fmt::format("{{\"format\":\"gpumem-history\",\"version\":1,\"events\":{},\"dropped\":0", count);
  // A trace from PyTorch or RMM keeps, converted, the allocator it was
  // recorded under; the format's own (gpumem's) goes without saying.
  const std::string allocator = recorded_policy(trace);
  if (!allocator.empty() && allocator != format_named("gpumem-history")->recorded_under) {
    buffer += ",\"allocator\":";
    detail::append_json_string(buffer, allocator);
  }
  buffer += "}\n";
  std::vector<std::string> labels(trace.contexts.size());
  for (std::size_t i = 1; i < trace.contexts.size(); ++i) labels[i] = trace.contexts[i].label();
  auto it = std::back_inserter(buffer);
  for (const Event& e : trace.events) {
    if (e.action == Action::kSnapshot) continue;
    fmt::format_to(it, "{{\"action\":\"{}\"", action_name(e.action));
    if (e.time_ns != kUnknown) fmt::format_to(it, ",\"time_ns\":{}", e.time_ns);
    fmt::format_to(it, ",\"addr\":{},\"size\":{}", e.address, e.size);
    if (e.action == Action::kAlloc) fmt::format_to(it, ",\"requested\":{}", e.size);
    fmt::format_to(it, ",\"stream\":{}", e.stream);
    if (e.device != 0) fmt::format_to(it, ",\"device\":{}", e.device);
    if (e.context < labels.size() && !labels[e.context].empty()) {
      buffer += ",\"tag\":";
      detail::append_json_string(buffer, labels[e.context]);
    }
    buffer += "}\n";
    if (buffer.size() > (1u << 16)) {
      out.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
      buffer.clear();
    }
  }
  out.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
}

bool is_history(std::string_view head) {
  // The header line names the format; key order varies by writer.
  return detail::body_of(head).starts_with("{") &&
         detail::first_line(head).find("\"gpumem-history\"") != std::string_view::npos;
}

}  // namespace gpumem::trace
