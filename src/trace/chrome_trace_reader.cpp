// torch.profiler's Chrome trace JSON, read through a SAX handler: events are
// built as the parser reaches them and no document tree is ever made, so a
// trace of ten million events costs its Events, not a DOM ten times the file.
//
// The format (PyTorch's torch/csrc/autograd/profiler_kineto.cpp, Kineto's
// JSON writer): {"traceEvents": [...], ...} or a bare array of events. An
// allocation or free is an instant named "[memory]" with args "Addr",
// "Bytes" (negative on free), "Total Allocated", "Total Reserved" (older
// PyTorch leaves them out), "Device Type" (c10::DeviceType: 0 CPU, 1 CUDA)
// and "Device Id"; "[OutOfMemory]" instants carry Bytes and the totals. An
// operator is a complete event {"ph": "X", "cat": "cpu_op", "ts", "dur"} on
// the same pid and tid as the memory events it encloses; with with_stack=True,
// Python frames are complete events {"cat": "python_function", "name":
// "file.py(line): function"} enclosing them the same way. Times are
// microseconds, integers or decimals (newer Kineto writes nanoseconds as
// three decimals), converted here exactly. prof.step() wraps each step in a
// complete event named "ProfilerStep#N" (cat "user_annotation" in newer
// PyTorch, "cpu_op" or "Operator" in older; Kineto mirrors it on the GPU
// timeline as "gpu_user_annotation", which is not the caller's thread):
// where the caller's iterations begin.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>
#include "gpumem/common/flag_names.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpumem/common/error.h"
#include "gpumem/trace/chrome_trace_reader.h"
#include "gpumem/trace/history_format.h"
#include "trace/text_lines.h"

namespace gpumem::trace {
namespace {

using json = nlohmann::json;
constexpr std::int64_t kMaxInt = std::numeric_limits<std::int64_t>::max();

// A numeric field of one event as the file gave it.
struct Number {
  enum class State : std::uint8_t { kMissing, kOk, kBad };
  State state = State::kMissing;
  std::int64_t value = 0;
  void set(std::int64_t v) {
    state = State::kOk;
    value = v;
  }
  void bad() { state = State::kBad; }
  bool ok() const { return state == State::kOk; }
};

// Microseconds as JSON wrote them ("12", "-3.5", "1796062679695603.508",
// "1.5e3") to nanoseconds, exactly when the digits allow (a double cannot
// hold 19 significant digits); nullopt when out of range.
std::optional<std::int64_t> micros_to_ns(std::string_view raw) {
  std::size_t i = 0;
  const bool negative = !raw.empty() && raw[0] == '-';
  if (negative) ++i;
  std::int64_t whole = 0;
  for (; i < raw.size() && raw[i] >= '0' && raw[i] <= '9'; ++i) {
    if (whole > (kMaxInt / 1000 - 1) / 10) return std::nullopt;
    whole = whole * 10 + (raw[i] - '0');
  }
  std::int64_t fraction = 0;  // ns
  bool round_up = false;
  if (i < raw.size() && raw[i] == '.') {
    int digits = 0;
    for (++i; i < raw.size() && raw[i] >= '0' && raw[i] <= '9'; ++i, ++digits) {
      if (digits < 3)
        fraction = fraction * 10 + (raw[i] - '0');
      else if (digits == 3)
        round_up = raw[i] >= '5';
    }
    for (; digits < 3; ++digits) fraction *= 10;
  }
  if (i != raw.size()) {
    // An exponent: rare enough that a double's precision will do.
    const double us = std::strtod(std::string(raw).c_str(), nullptr);
    const double ns = std::nearbyint(us * 1000.0);
    if (!(std::fabs(ns) < 9.2e18)) return std::nullopt;
    return static_cast<std::int64_t>(ns);
  }
  const std::int64_t ns = whole * 1000 + fraction + (round_up ? 1 : 0);
  return negative ? -ns : ns;
}

// A pid or tid: Kineto writes numbers, some tools strings.
struct ThreadPart {
  bool is_string = false;
  std::int64_t number = 0;
  std::string text;
  bool operator==(const ThreadPart&) const = default;
  void append_key(std::string& key) const {
    if (is_string)
      key += 's' + text;
    else
      key += 'n' + std::to_string(number);
    key += '\x1f';
  }
};

struct Span {
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::uint32_t name = 0;
};

enum class Field : std::uint8_t {
  kNone,
  kName,
  kPh,
  kCat,
  kTs,
  kDur,
  kPid,
  kTid,
  kArgs,
  kAddr,
  kBytes,
  kTotalAllocated,
  kTotalReserved,
  kDeviceType,
  kDeviceId,
};

Field event_field(std::string_view key) {
  switch (key.size()) {
    case 2:
      if (key == "ph") return Field::kPh;
      if (key == "ts") return Field::kTs;
      break;
    case 3:
      if (key == "cat") return Field::kCat;
      if (key == "dur") return Field::kDur;
      if (key == "pid") return Field::kPid;
      if (key == "tid") return Field::kTid;
      break;
    case 4:
      if (key == "name") return Field::kName;
      if (key == "args") return Field::kArgs;
      break;
    default: break;
  }
  return Field::kNone;
}

Field arg_field(std::string_view key) {
  if (key == "Addr") return Field::kAddr;
  if (key == "Bytes") return Field::kBytes;
  if (key == "Total Allocated") return Field::kTotalAllocated;
  if (key == "Total Reserved") return Field::kTotalReserved;
  if (key == "Device Type") return Field::kDeviceType;
  if (key == "Device Id") return Field::kDeviceId;
  return Field::kNone;
}

// The SAX handler. Depths: the root container is depth 1; event objects sit
// at events_depth_, their fields one deeper, "args" fields two deeper;
// anything nested further is passed over.
class ChromeTraceHandler {
 public:
  ChromeTraceHandler(Trace& trace, bool strict) : trace_(trace), strict_(strict) {}

  // --- SAX interface ------------------------------------------------------
  bool null() { return scalar(); }
  bool boolean(bool) { return scalar(); }
  bool number_integer(std::int64_t v) {
    if (Field f = value_field(); f != Field::kNone) set_integer(f, v);
    return scalar();
  }
  bool number_unsigned(std::uint64_t v) {
    if (Field f = value_field(); f != Field::kNone) {
      if (v <= static_cast<std::uint64_t>(kMaxInt))
        set_integer(f, static_cast<std::int64_t>(v));
      else if (f == Field::kAddr)
        set_address(v);
      else
        number_of(f).bad();
    }
    return scalar();
  }
  bool number_float(double, const std::string& raw) {
    switch (Field f = value_field(); f) {
      case Field::kNone:
      case Field::kPh:
      case Field::kCat:
      case Field::kArgs: break;
      case Field::kName: name_bad_ = true; break;
      case Field::kTs:
      case Field::kDur:
        if (auto ns = micros_to_ns(raw))
          number_of(f).set(*ns);
        else
          number_of(f).bad();
        break;
      case Field::kPid:
      case Field::kTid: thread_part(f) = {true, 0, raw}; break;
      default: number_of(f).bad(); break;  // byte counts, addresses and ids are integers
    }
    return scalar();
  }
  bool string(std::string& s) {
    if (Field f = value_field(); f != Field::kNone) set_string(f, s);
    return scalar();
  }
  bool binary(json::binary_t&) { return scalar(); }
  bool key(std::string& k) {
    if (depth_ == events_depth_ + 1)
      field_ = event_field(k);
    else if (in_args_ && depth_ == events_depth_ + 2)
      field_ = arg_field(k);
    else if (depth_ == 1 && root_is_object_)
      trace_events_key_ = k == "traceEvents";
    return true;
  }
  bool start_object(std::size_t) {
    if (depth_ == 0) {
      root_container_ = root_is_object_ = true;
    } else if (depth_ == 1 && root_is_object_ && trace_events_key_) {
      not_an_array_ = true;
      return false;
    } else if (depth_ == events_depth_) {
      begin_event();
    } else if (in_event_ && depth_ == events_depth_ + 1 && field_ == Field::kArgs) {
      in_args_ = true;
    } else {
      container_value();
    }
    ++depth_;
    return true;
  }
  bool end_object() {
    --depth_;
    if (in_args_ && depth_ == events_depth_ + 1)
      in_args_ = false;
    else if (in_event_ && depth_ == events_depth_)
      end_event();
    return true;
  }
  bool start_array(std::size_t) {
    if (depth_ == 0) {
      root_container_ = true;
      events_depth_ = 1;  // a bare array of events
    } else if (depth_ == 1 && root_is_object_ && trace_events_key_) {
      events_depth_ = 2;
      trace_events_key_ = false;
      seen_trace_events_ = true;
    } else {
      if (depth_ == events_depth_) not_an_event();
      container_value();
    }
    ++depth_;
    return true;
  }
  bool end_array() {
    --depth_;
    if (depth_ + 1 == events_depth_) events_depth_ = kNoDepth;  // the events array closed
    return true;
  }
  bool parse_error(std::size_t position, const std::string& last_token, const nlohmann::detail::exception& e) {
    error_position_ = position;
    error_token_ = last_token;
    error_end_of_input_ = std::string_view(e.what()).find("end of input") != std::string_view::npos;
    failed_ = true;
    return false;
  }

  // --- After parsing ---------------------------------------------------------
  bool failed() const { return failed_; }
  std::size_t error_position() const { return error_position_; }
  const std::string& error_token() const { return error_token_; }
  bool error_end_of_input() const { return error_end_of_input_; }
  bool started() const { return root_container_; }
  bool not_an_array() const { return not_an_array_; }
  bool missing_trace_events() const { return root_is_object_ && !seen_trace_events_; }
  bool inside_event() const { return in_event_; }
  std::uint64_t problems() const { return problems_; }
  const std::string& first_problem() const { return first_problem_; }

  // Tags every memory event with the innermost cpu_op span enclosing it on
  // its thread, then puts the events in time order.
  void finish();

 private:
  static constexpr long kNoDepth = -10;

  Field value_field() {
    if (!in_event_) return Field::kNone;
    if (depth_ == events_depth_ + 1 || (in_args_ && depth_ == events_depth_ + 2)) return field_;
    return Field::kNone;
  }
  bool scalar() {
    if (depth_ == events_depth_)
      not_an_event();
    else if (depth_ == 1 && root_is_object_ && trace_events_key_) {
      not_an_array_ = true;
      return false;
    }
    return true;
  }
  // An object or array where a field's value should be a scalar.
  void container_value() {
    if (Field f = value_field(); f != Field::kNone && f != Field::kArgs) {
      if (f == Field::kName)
        name_bad_ = true;
      else if (f != Field::kPh && f != Field::kCat && f != Field::kPid && f != Field::kTid)
        number_of(f).bad();
    }
    field_ = Field::kNone;
  }

  Number& number_of(Field f) {
    switch (f) {
      case Field::kTs: return ts_;
      case Field::kDur: return dur_;
      case Field::kAddr: return addr_;
      case Field::kBytes: return bytes_;
      case Field::kTotalAllocated: return total_allocated_;
      case Field::kTotalReserved: return total_reserved_;
      case Field::kDeviceType: return device_type_;
      case Field::kDeviceId: return device_id_;
      default: return ignored_;
    }
  }
  ThreadPart& thread_part(Field f) { return f == Field::kPid ? pid_ : tid_; }

  void set_integer(Field f, std::int64_t v) {
    switch (f) {
      case Field::kTs:
      case Field::kDur:
        if (v > kMaxInt / 1000 || v < -(kMaxInt / 1000))
          number_of(f).bad();
        else
          number_of(f).set(v * 1000);
        break;
      case Field::kPid:
      case Field::kTid: {
        ThreadPart& p = thread_part(f);
        p.is_string = false;
        p.number = v;
        break;
      }
      case Field::kName: name_bad_ = true; break;
      case Field::kPh:
      case Field::kCat:
      case Field::kArgs: break;
      default: number_of(f).set(v); break;
    }
  }
  // Addresses past 2^63 (PyTorch writes them as intptr_t, so negative in
  // practice, but some writers use unsigned).
  void set_address(std::uint64_t v) { addr_.set(static_cast<std::int64_t>(v)); }
  void set_string(Field f, const std::string& s) {
    switch (f) {
      case Field::kName: name_.assign(s); break;
      case Field::kPh: ph_ = s.size() == 1 ? s[0] : '?'; break;
      case Field::kCat:
        cpu_op_ = s == "cpu_op";
        python_ = s == "python_function";
        gpu_annotation_ = s == "gpu_user_annotation";
        break;
      case Field::kPid:
      case Field::kTid: {
        ThreadPart& p = thread_part(f);
        p.is_string = true;
        p.text.assign(s);
        break;
      }
      case Field::kArgs: break;
      default: {
        // Numbers written as strings are taken; anything else is a wrong type.
        std::int64_t v = 0;
        std::uint64_t u = 0;
        if (detail::parse_whole(s, v))
          set_integer(f, v);
        else if (f == Field::kAddr && detail::parse_hex(s, u) && s.size() > 2 && s[1] == 'x')
          set_address(u);
        else
          number_of(f).bad();
      }
    }
  }

  void begin_event() {
    in_event_ = true;
    field_ = Field::kNone;
    name_.clear();
    name_bad_ = false;
    ph_ = 0;
    cpu_op_ = false;
    python_ = false;
    gpu_annotation_ = false;
    ts_ = dur_ = addr_ = bytes_ = total_allocated_ = total_reserved_ = device_type_ = device_id_ = Number{};
    pid_ = tid_ = ThreadPart{};
  }
  void not_an_event() {
    problem(events_seen_, "not an event object");
    ++events_seen_;
  }
  void end_event();
  std::uint32_t thread_index();
  std::uint32_t name_index();
  // A [memory] or [OutOfMemory] event that cannot be used.
  void problem(std::uint64_t index, const std::string& what);

  Trace& trace_;
  bool strict_;

  long depth_ = 0;
  long events_depth_ = kNoDepth;
  bool root_container_ = false;
  bool root_is_object_ = false;
  bool trace_events_key_ = false;
  bool seen_trace_events_ = false;
  bool not_an_array_ = false;

  // The event being read.
  bool in_event_ = false;
  bool in_args_ = false;
  Field field_ = Field::kNone;
  std::string name_;
  bool name_bad_ = false;
  char ph_ = 0;
  bool cpu_op_ = false;
  bool python_ = false;
  bool gpu_annotation_ = false;
  Number ts_, dur_, addr_, bytes_, total_allocated_, total_reserved_, device_type_, device_id_, ignored_;
  ThreadPart pid_, tid_;
  std::uint64_t events_seen_ = 0;

  // Threads: (pid, tid) -> index, with the last one cached (most events
  // come from one thread).
  std::unordered_map<std::string, std::uint32_t> thread_index_;
  ThreadPart last_pid_, last_tid_;
  std::uint32_t last_thread_ = UINT32_MAX;
  std::string key_;

  std::unordered_map<std::string, std::uint32_t> name_index_;
  std::vector<std::string> names_;
  std::vector<std::vector<Span>> spans_;         // per thread
  std::vector<std::vector<Span>> python_spans_;  // per thread, python_function
  std::vector<std::uint32_t> event_thread_;      // per trace event

  std::uint64_t problems_ = 0;
  std::string first_problem_;

  bool failed_ = false;
  std::size_t error_position_ = 0;
  std::string error_token_;
  bool error_end_of_input_ = false;
};

void ChromeTraceHandler::problem(std::uint64_t index, const std::string& what) {
  std::string place = fmt::format("traceEvents[{}]: {}", index, what);
  if (strict_)
    throw InputError(fmt::format("{}: {} (without " GPUMEM_FLAG_STRICT ", such events are skipped and counted)",
                                 printable(trace_.source), place));
  ++trace_.skipped_records;
  if (problems_++ == 0) first_problem_ = std::move(place);
}

std::uint32_t ChromeTraceHandler::thread_index() {
  if (last_thread_ != UINT32_MAX && pid_ == last_pid_ && tid_ == last_tid_) return last_thread_;
  key_.clear();
  pid_.append_key(key_);
  tid_.append_key(key_);
  auto [it, inserted] = thread_index_.try_emplace(key_, static_cast<std::uint32_t>(spans_.size()));
  if (inserted) {
    spans_.emplace_back();
    python_spans_.emplace_back();
  }
  last_pid_ = pid_;
  last_tid_ = tid_;
  last_thread_ = it->second;
  return it->second;
}

std::uint32_t ChromeTraceHandler::name_index() {
  auto it = name_index_.find(name_);
  if (it != name_index_.end()) return it->second;
  const auto index = static_cast<std::uint32_t>(names_.size());
  names_.push_back(name_);
  name_index_.emplace(name_, index);
  return index;
}

void ChromeTraceHandler::end_event() {
  in_event_ = false;
  in_args_ = false;
  const std::uint64_t index = events_seen_++;
  if (name_bad_) return;
  const bool memory = name_ == "[memory]";
  const bool oom = !memory && name_ == "[OutOfMemory]";
  if (!memory && !oom) {
    const bool span = ph_ == 'X' && ts_.ok() && dur_.ok() && dur_.value >= 0 && ts_.value <= kMaxInt - dur_.value;
    if (span && !gpu_annotation_ && name_.starts_with("ProfilerStep#"))
      trace_.profiler_steps.push_back({ts_.value, ts_.value + dur_.value});
    // A span that can tag memory events: an operator with a start and a length.
    if (span && (cpu_op_ || python_))
      (cpu_op_ ? spans_ : python_spans_)[thread_index()].push_back({ts_.value, ts_.value + dur_.value, name_index()});
    return;
  }
  const char* what = memory ? "[memory] event" : "[OutOfMemory] event";
  auto check = [&](const Number& n, const char* arg, bool required) {
    if (n.state == Number::State::kBad) {
      problem(index, fmt::format("{}: \"{}\" is not an integer", what, arg));
      return false;
    }
    if (required && n.state == Number::State::kMissing) {
      problem(index, fmt::format("{} without \"{}\"", what, arg));
      return false;
    }
    return true;
  };
  if (ts_.state == Number::State::kBad) return problem(index, fmt::format("{}: \"ts\" is not a number in range", what));
  if (!ts_.ok()) return problem(index, fmt::format("{} without \"ts\"", what));
  if (!check(bytes_, "Bytes", true) || !check(addr_, "Addr", memory) ||
      !check(total_allocated_, "Total Allocated", false) || !check(total_reserved_, "Total Reserved", false) ||
      !check(device_type_, "Device Type", false) || !check(device_id_, "Device Id", false))
    return;
  if (bytes_.value == std::numeric_limits<std::int64_t>::min())
    return problem(index, fmt::format("{}: \"Bytes\" is out of range", what));
  if (memory && bytes_.value == 0)
    return problem(index, "[memory] event of 0 bytes (neither an allocation nor a free)");
  Event e;
  e.time_ns = ts_.value;
  if (memory) {
    e.action = bytes_.value > 0 ? Action::kAlloc : Action::kFreeCompleted;
    e.address = static_cast<std::uint64_t>(addr_.value);
  } else {
    e.action = Action::kOom;
  }
  e.size = bytes_.value < 0 ? -bytes_.value : bytes_.value;
  // CPU memory (Device Type 0, whose Device Id PyTorch writes as -1) is
  // device -1, apart from every GPU; other device types keep their id.
  if (device_type_.ok() && device_type_.value == 0) {
    e.device = -1;
  } else if (device_id_.ok()) {
    if (device_id_.value < -1 || device_id_.value > std::numeric_limits<std::int32_t>::max())
      return problem(index, fmt::format("{}: \"Device Id\" {} is out of range", what, device_id_.value));
    e.device = static_cast<std::int32_t>(device_id_.value);
  }
  if (total_allocated_.ok()) e.total_allocated = total_allocated_.value;
  if (total_reserved_.ok()) e.total_reserved = total_reserved_.value;
  trace_.events.push_back(e);
  event_thread_.push_back(thread_index());
}

// The spans open at increasing times: `open` holds those started so far
// that may still enclose the next time, innermost on top.
class SpanSweep {
 public:
  explicit SpanSweep(std::vector<Span>& spans) : spans_(spans) {
    // Outer spans before the spans they enclose.
    std::sort(spans_.begin(), spans_.end(),
              [](const Span& a, const Span& b) { return a.start != b.start ? a.start < b.start : a.end > b.end; });
  }
  const std::vector<const Span*>& at(std::int64_t time) {
    for (; next_ < spans_.size() && spans_[next_].start <= time; ++next_) {
      while (!open_.empty() && open_.back()->end < spans_[next_].start) open_.pop_back();
      open_.push_back(&spans_[next_]);
    }
    while (!open_.empty() && open_.back()->end < time) open_.pop_back();
    return open_;
  }

 private:
  std::vector<Span>& spans_;
  std::size_t next_ = 0;
  std::vector<const Span*> open_;
};

// Kineto names a Python frame "file.py(line): function".
Frame python_frame(const std::string& name) {
  const std::size_t close = name.find("): ");
  const std::size_t open = close == std::string::npos ? close : name.rfind('(', close);
  Frame f;
  std::int64_t line = 0;
  if (open == std::string::npos || !detail::parse_whole(name.substr(open + 1, close - open - 1), line)) {
    f.name = name;
    return f;
  }
  f.filename = name.substr(0, open);
  f.line = line;
  f.name = name.substr(close + 3);
  return f;
}

void ChromeTraceHandler::finish() {
  // Events per thread, each thread's in time order (file order on ties).
  const std::size_t n = trace_.events.size();
  std::vector<std::size_t> first(spans_.size() + 1, 0);
  for (std::uint32_t t : event_thread_) ++first[t + 1];
  for (std::size_t t = 0; t < spans_.size(); ++t) first[t + 1] += first[t];
  std::vector<std::uint32_t> order(n);
  {
    std::vector<std::size_t> next(first.begin(), first.end() - 1);
    for (std::size_t i = 0; i < n; ++i) order[next[event_thread_[i]]++] = static_cast<std::uint32_t>(i);
  }
  // Contexts by (operator name, innermost Python span): spans nest, so the
  // innermost one stands for the whole stack.
  std::map<std::pair<std::uint32_t, const Span*>, std::uint32_t> context_of;
  for (std::size_t t = 0; t < spans_.size(); ++t) {
    if (spans_[t].empty() && python_spans_[t].empty()) continue;
    auto begin = order.begin() + static_cast<std::ptrdiff_t>(first[t]);
    auto end = order.begin() + static_cast<std::ptrdiff_t>(first[t + 1]);
    std::stable_sort(begin, end, [&](std::uint32_t a, std::uint32_t b) {
      return trace_.events[a].time_ns < trace_.events[b].time_ns;
    });
    SpanSweep ops(spans_[t]), python(python_spans_[t]);
    for (auto it = begin; it != end; ++it) {
      Event& e = trace_.events[*it];
      const std::vector<const Span*>& op = ops.at(e.time_ns);
      const std::vector<const Span*>& frames = python.at(e.time_ns);
      if (op.empty() && frames.empty()) continue;
      const std::uint32_t op_name = op.empty() ? UINT32_MAX : op.back()->name;
      auto [found, inserted] = context_of.try_emplace({op_name, frames.empty() ? nullptr : frames.back()}, 0);
      if (inserted) {
        Context c;
        if (!op.empty()) c.tag = names_[op_name];
        // Innermost first, as PyTorch writes stacks.
        for (auto f = frames.rbegin(); f != frames.rend(); ++f) c.frames.push_back(python_frame(names_[(*f)->name]));
        found->second = trace_.intern(std::move(c));
      }
      e.context = found->second;
    }
  }
  std::sort(trace_.profiler_steps.begin(), trace_.profiler_steps.end(),
            [](const Trace::StepSpan& a, const Trace::StepSpan& b) { return a.start_ns < b.start_ns; });
  // Time order; events at the same time keep the file's order.
  auto by_time = [](const Event& a, const Event& b) { return a.time_ns < b.time_ns; };
  if (!std::is_sorted(trace_.events.begin(), trace_.events.end(), by_time))
    std::stable_sort(trace_.events.begin(), trace_.events.end(), by_time);
}

}  // namespace

Trace read_chrome_trace(std::string_view data, const std::string& name, const ReadOptions& options) {
  Trace trace;
  trace.format = "chrome-trace";
  trace.source = name;
  ChromeTraceHandler handler(trace, options.strict);
  json::sax_parse(data.begin(), data.end(), &handler, json::input_format_t::json, /*strict=*/true);
  const std::string file = printable(name);
  if (!handler.started()) {
    const std::size_t byte = std::min(handler.error_position(), data.size());
    throw InputError(fmt::format("{}: byte {}: {}", file, handler.failed() ? byte : 0,
                                 data.find_first_not_of(" \t\r\n") == std::string_view::npos
                                     ? "the file is empty"
                                     : "not a Chrome trace (the top level is not a JSON object or array)"));
  }
  if (handler.not_an_array()) throw InputError(fmt::format("{}: \"traceEvents\" is not an array", file));
  if (handler.failed()) {
    // The lexer counts the end of the input as a character read.
    const std::size_t byte = std::min(handler.error_position(), data.size());
    const bool truncated = handler.error_position() > data.size() || handler.error_end_of_input();
    const std::string problem =
        truncated ? std::string("the file ends inside the JSON")
                  : fmt::format("invalid JSON (last read: '{}')", printable(handler.error_token().substr(0, 40)));
    if (options.strict) throw InputError(fmt::format("{}: byte {}: {}", file, byte, problem));
    if (handler.inside_event()) ++trace.skipped_records;  // the event it cut
    trace.warnings.push_back(fmt::format("{}: byte {}: {}; kept the {} memory events read before it", file, byte,
                                         problem, trace.events.size()));
  } else if (handler.missing_trace_events()) {
    throw InputError(fmt::format("{}: no \"traceEvents\" array (not a Chrome trace)", file));
  }
  if (handler.problems() > 0)
    trace.warnings.push_back(fmt::format("{}: skipped {} events that could not be used; the first: {}", file,
                                         handler.problems(), handler.first_problem()));
  handler.finish();
  return trace;
}

bool is_chrome_trace(std::string_view head) {
  const std::string_view body = detail::body_of(head);
  if (body.starts_with("[")) return true;
  return body.starts_with("{") && !is_history(head);
}

}  // namespace gpumem::trace
