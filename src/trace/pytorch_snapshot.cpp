// PyTorch memory snapshots (torch.cuda.memory._dump_snapshot()), read and
// written. The shape, as torch/csrc/cuda/Module.cpp (THCPModule_memorySnapshot)
// and torch/csrc/cuda/memory_snapshot.cpp (_memory_snapshot_pickled) build it:
//
//   {"segments": [{"device", "address", "total_size", "allocated_size",
//                  "active_size", "requested_size", "stream", "segment_type",
//                  "segment_pool_id", "is_expandable", "frames",
//                  "blocks": [{"address", "size", "requested_size", "state",
//                              "frames"}]}],
//    "device_traces": [[{"action", "addr" (or "device_free" for oom), "size",
//                        "stream", "time_us", "frames"}], ...one list per device],
//    "allocator_settings": {...}, "external_annotations": [...]}
//
// frames are lists of {"filename", "line", "name"}, innermost first, shared
// between entries through the pickle memo. Older snapshots lack block
// addresses (PyTorch computes them as the segment's address plus the sizes
// before), is_expandable and time_us; 1.13's blocks carry "history" instead
// of "frames" (torch/cuda/_memory_viz.py, _block_extra_legacy); the oldest
// files are a bare list of segments (_memory_viz.py's _read).
//
// Reading streams: each trace entry becomes an Event the moment its dict is
// filled (pickle::Hooks::dict_filled), the dict is dropped, and the device
// lists hold ranges of event ids. Devices come from the list positions at
// the end, with no copy when the ids come in file order (they always do in
// files PyTorch writes).
#include <algorithm>
#include <limits>
#include <optional>
#include <ostream>
#include <stdexcept>

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/trace/pytorch_snapshot.h"
#include "trace/pickle_reader.h"
#include "trace/pickle_writer.h"

namespace gpumem::trace {
namespace {

// A top-level key of gpumem's own in the snapshots it writes: the first
// device number that stands for host memory (device -1, then -2, ...).
constexpr const char* kHostDevicesKey = "gpumem_host_devices_from";

using pickle::Container;
using pickle::Kind;
using pickle::Machine;
using pickle::Value;

// A context's tag travels as a first frame {"filename": kTagFile, "line": 0,
// "name": TAG}: memory_viz shows it like any frame, and it reads back.
constexpr std::string_view kTagFile = "<gpumem tag>";
// Device lists past this are not read, nor written.
constexpr std::size_t kMaxDevices = std::size_t{1} << 16;
constexpr std::int64_t kMaxTimeUs = std::numeric_limits<std::int64_t>::max() / 1000;

// What each converted entry had.
enum : std::uint8_t {
  kHasAddr = 1,  // "addr", or "device_free" for oom
  kHasSize = 2,
  kUnknownAction = 4,  // counted when met
  kInvalid = 8,        // a field of the wrong type; counted when met
};

bool as_int64(Value v, std::int64_t* out) {
  if (v.kind != Kind::kInt) return false;
  *out = static_cast<std::int64_t>(v.bits);
  return true;
}

// Addresses and streams: any 64-bit pattern. torch::jit::Pickler stores
// size_t fields as int64, so the top half of the range arrives negative.
bool as_bits64(Value v, std::uint64_t* out) {
  if (v.kind != Kind::kInt && v.kind != Kind::kUInt) return false;
  *out = v.bits;
  return true;
}

bool as_size(Value v, std::int64_t* out) { return as_int64(v, out) && *out >= 0; }

class SnapshotReader final : public pickle::Hooks {
 public:
  SnapshotReader(std::string_view data, const std::string& name, const ReadOptions& options)
      : m_(data, name, *this), strict_(options.strict) {
    trace_.format = "pytorch-snapshot";
    trace_.source = name;
    // An entry takes 30 bytes at the least; reserving address space spares
    // the copies (and the brief double size) of growing ten million events.
    trace_.events.reserve(std::min<std::size_t>(data.size() / 32, std::size_t{1} << 24));
    for (std::size_t k = 0; k < kKeyCount; ++k) key_[k] = m_.intern(kKeyNames[k]);
    // Action names get consecutive ids, so an id maps to an Action by subtraction.
    first_action_ = m_.intern(action_name(static_cast<Action>(0)));
    for (std::size_t a = 1; a < kActions; ++a) {
      if (m_.intern(action_name(static_cast<Action>(a))) != first_action_ + a)
        throw std::logic_error("snapshot reader: action names must intern to consecutive ids");
    }
  }

  Trace read() {
    Value root;
    std::optional<pickle::PickleError> stopped;
    try {
      root = m_.run();
    } catch (const pickle::PickleError& e) {
      if (strict_ || e.needs_code) throw;
      salvaging_ = true;
      root = m_.salvage();
      const Container* c = m_.container(root);
      if (c == nullptr || (c->kind != Kind::kDict && c->kind != Kind::kList)) throw;
      stopped = e;
    }
    read_root(root);
    if (stopped) {
      trace_.warnings.insert(trace_.warnings.begin(),
                             fmt::format("{}: byte {}: {}; kept the {} events read before it", printable(m_.name()),
                                         stopped->offset, stopped->problem, trace_.events.size()));
    }
    if (unknown_actions_ > 0)
      trace_.warnings.push_back(fmt::format("{}; skipped {} trace entries with actions gpumem does not know",
                                            first_unknown_, unknown_actions_));
    if (bad_records_ > 0)
      trace_.warnings.push_back(fmt::format("{}; skipped {} records gpumem could not use", first_bad_, bad_records_));
    trace_.skipped_records = unknown_actions_ + bad_records_ + incomplete_;
    return std::move(trace_);
  }

 private:
  static constexpr std::size_t kActions = 9;  // Action's values, in order
  // The keys in rows, as their names below.
  // clang-format off
  enum Key : std::size_t {
    kAction, kAddr, kDeviceFree, kSize, kStream, kTimeUs, kFrames, kFilename, kLine, kName, kSegments,
    kDeviceTraces, kDevice, kAddress, kTotalSize, kSegmentType, kIsExpandable, kBlocks, kRequestedSize, kState,
    kHistory, kRealSize, kHostDevicesFrom, kKeyCount
  };

  static constexpr const char* kKeyNames[kKeyCount] = {
      "action",        "addr",   "device_free",    "size",          "stream",  "time_us",  "frames",     "filename",
      "line",          "name",   "segments",       "device_traces", "device",  "address",  "total_size", "segment_type",
      "is_expandable", "blocks", "requested_size", "state",         "history", "real_size", kHostDevicesKey};
  // clang-format on

  // ---- entries, as they are filled ----

  std::optional<Value> dict_filled(Machine&, const Container& dict, std::size_t first_new) override {
    bool entry = false;
    for (std::size_t i = first_new * 2; i < dict.items.size(); i += 2) {
      const Value& k = dict.items[i];
      if (k.kind == Kind::kStr && k.bits == key_[kAction]) entry = true;
    }
    if (salvaging_) {
      // Closed by salvage, not by the file: what the input stopped inside.
      // An entry is not converted; a segment is left out (its blocks may
      // be cut short).
      if (entry) ++incomplete_;
      closed_by_salvage_.push_back(&dict);
      return std::nullopt;
    }
    if (!entry) return std::nullopt;
    const std::uint64_t id = trace_.events.size();
    trace_.events.emplace_back();
    flags_.push_back(0);
    for (std::size_t i = 0; i < dict.items.size(); i += 2) apply(id, dict.items[i], dict.items[i + 1]);
    return Value{Kind::kOpaque, 0, id};
  }

  void set_opaque(Machine&, Value target, Value key, Value value) override { apply(target.bits, key, value); }

  void apply(std::uint64_t id, Value key, Value value) {
    if (key.kind != Kind::kStr) return;
    Event& e = trace_.events[static_cast<std::size_t>(id)];
    std::uint8_t& f = flags_[static_cast<std::size_t>(id)];
    const std::uint64_t k = key.bits;
    if (k == key_[kAction]) {
      if (value.kind != Kind::kStr) return bad_entry(id, "'action' is not a string");
      if (value.bits >= first_action_ && value.bits < first_action_ + kActions) {
        e.action = static_cast<Action>(value.bits - first_action_);
        f &= static_cast<std::uint8_t>(~kUnknownAction);
        return;
      }
      const std::string problem = fmt::format("unknown action '{}'", printable(m_.text(value)));
      if (strict_) m_.fail(m_.offset(), fmt::format("event {}: {}", id, problem));
      if (!(f & kUnknownAction)) {
        f |= kUnknownAction;
        if (unknown_actions_++ == 0) first_unknown_ = place(id) + problem;
      }
    } else if (k == key_[kAddr] || k == key_[kDeviceFree]) {
      // PyTorch keeps an oom's device_free in the entry's address field
      // (TraceEntry::addr_; Module.cpp writes it under "device_free").
      if (!as_bits64(value, &e.address)) return bad_entry(id, fmt::format("'{}' is not an integer", m_.text(key)));
      f |= kHasAddr;
    } else if (k == key_[kSize]) {
      if (!as_size(value, &e.size)) return bad_entry(id, "'size' is not a non-negative integer");
      f |= kHasSize;
    } else if (k == key_[kStream]) {
      if (!as_bits64(value, &e.stream)) return bad_entry(id, "'stream' is not an integer");
    } else if (k == key_[kTimeUs]) {
      std::int64_t us = 0;
      if (value.kind == Kind::kNone) {
        e.time_ns = kUnknown;
      } else if (!as_int64(value, &us) || us > kMaxTimeUs || us < -kMaxTimeUs) {
        return bad_entry(id, "'time_us' is not an integer of microseconds");
      } else {
        e.time_ns = us * 1000;
      }
    } else if (k == key_[kFrames]) {
      if (!context_of(value, &e.context))
        return bad_entry(id, "'frames' is not a list of {filename, line, name} dicts");
    }
  }

  std::string place(std::uint64_t id) const {
    return fmt::format("{}: byte {}: event {}: ", printable(m_.name()), m_.offset(), id);
  }

  void bad_entry(std::uint64_t id, const std::string& problem) {
    if (strict_) m_.fail(m_.offset(), fmt::format("event {}: {}", id, problem));
    std::uint8_t& f = flags_[static_cast<std::size_t>(id)];
    if (f & kInvalid) return;
    f |= kInvalid;
    if (bad_records_++ == 0) first_bad_ = place(id) + problem;
  }

  // After STOP there are no byte offsets: the place is a path in the dict.
  void bad_record(const std::string& where, const std::string& problem) {
    if (strict_) throw InputError(fmt::format("{}: {}: {}", printable(m_.name()), where, problem));
    if (bad_records_++ == 0) first_bad_ = fmt::format("{}: {}: {}", printable(m_.name()), where, problem);
  }

  // A list of frame dicts as an interned context; cached on the list, which
  // PyTorch shares between every entry with the same stack. (A frame dict
  // changed after a stack holding it was first used goes unseen; no
  // snapshot writer changes a container once it is written.)
  bool context_of(Value frames, std::uint32_t* out) {
    Container* list = m_.container(frames);
    if (list == nullptr || (list->kind != Kind::kList && list->kind != Kind::kTuple)) return false;
    if (list->derived_valid) {
      *out = list->derived;
      return true;
    }
    Context context;
    context.frames.reserve(list->size());
    for (std::size_t i = 0; i < list->size(); ++i) {
      const FrameFields* f = frame_of(list->at(i));
      if (f == nullptr) return false;
      context.frames.push_back(Frame{std::string(f->filename), f->line, std::string(f->name)});
    }
    if (!context.frames.empty() && context.frames.front().filename == kTagFile && context.frames.front().line == 0) {
      context.tag = std::move(context.frames.front().name);
      context.frames.erase(context.frames.begin());
    }
    *out = trace_.intern(std::move(context));
    list->derived = *out;
    list->derived_valid = true;
    return true;
  }

  // One frame dict's fields, decoded once: PyTorch shares each frame dict
  // between every stack it is in. The dict's `derived` field holds its
  // index in frames_.
  struct FrameFields {
    std::string_view filename;
    std::string_view name;
    std::int64_t line = 0;
  };

  const FrameFields* frame_of(Value v) {
    Container* d = m_.container(v);
    if (d == nullptr || d->kind != Kind::kDict) return nullptr;
    if (d->derived_valid) return &frames_[d->derived];
    FrameFields f;
    if (auto x = m_.get(*d, key_[kFilename])) {
      if (x->kind != Kind::kStr) return nullptr;
      f.filename = m_.text(*x);
    }
    if (auto x = m_.get(*d, key_[kLine])) {
      if (!as_int64(*x, &f.line)) return nullptr;
    }
    if (auto x = m_.get(*d, key_[kName])) {
      if (x->kind != Kind::kStr) return nullptr;
      f.name = m_.text(*x);
    }
    if (frames_.size() >= std::numeric_limits<std::uint32_t>::max()) return nullptr;
    d->derived = static_cast<std::uint32_t>(frames_.size());
    d->derived_valid = true;
    frames_.push_back(f);
    return &frames_.back();
  }

  // ---- the structure, after STOP ----

  void read_root(Value root) {
    const Container* c = m_.container(root);
    if (c != nullptr && c->kind == Kind::kList) {
      // The oldest format: a bare list of segments, no history.
      trace_.events.clear();
      return read_segments(root, "the top-level list");
    }
    if (c == nullptr || c->kind != Kind::kDict) {
      throw InputError(fmt::format("{}: byte 0: the pickle holds a {}, not a snapshot dict", printable(m_.name()),
                                   c                            ? "tuple or set"
                                   : root.kind == Kind::kOpaque ? "lone trace entry"
                                                                : "scalar"));
    }
    if (auto segments = m_.get(*c, key_[kSegments])) read_segments(*segments, "segments");
    if (auto traces = m_.get(*c, key_[kDeviceTraces])) {
      read_device_traces(*traces);
    } else {
      trace_.events.clear();  // entries met elsewhere are not a device's history
    }
    // gpumem's writer numbered host memory after the GPUs: number it back.
    std::int64_t from = 0;
    if (auto host = m_.get(*c, key_[kHostDevicesFrom]);
        host && as_size(*host, &from) && static_cast<std::size_t>(from) < kMaxDevices) {
      auto back = [from](std::int32_t& device) {
        if (device >= from) device = static_cast<std::int32_t>(-1 - (device - from));
      };
      for (Event& e : trace_.events) back(e.device);
      for (SnapshotSegment& s : trace_.segments) back(s.device);
    }
  }

  void read_segments(Value list_value, const char* where) {
    const Container* list = m_.container(list_value);
    if (list == nullptr || list->kind != Kind::kList) return bad_record(where, "is not a list");
    for (std::size_t s = 0; s < list->size(); ++s) {
      const std::string at = fmt::format("segments[{}]", s);
      const Container* d = m_.container(list->at(s));
      if (d == nullptr || d->kind != Kind::kDict) {
        bad_record(at, "is not a dict");
        continue;
      }
      if (std::find(closed_by_salvage_.begin(), closed_by_salvage_.end(), d) != closed_by_salvage_.end()) {
        ++incomplete_;
        continue;
      }
      SnapshotSegment seg;
      std::int64_t device = 0;
      if (auto v = m_.get(*d, key_[kDevice])) {
        if (!as_int64(*v, &device) || device < 0 || device > std::numeric_limits<std::int32_t>::max()) {
          bad_record(at, "'device' is not a device number");
          continue;
        }
      }
      seg.device = static_cast<std::int32_t>(device);
      auto address = m_.get(*d, key_[kAddress]);
      if (!address || !as_bits64(*address, &seg.address)) {
        bad_record(at, "'address' is missing or not an integer");
        continue;
      }
      auto total = m_.get(*d, key_[kTotalSize]);
      if (!total || !as_size(*total, &seg.total_size)) {
        bad_record(at, "'total_size' is missing or not a non-negative integer");
        continue;
      }
      if (auto v = m_.get(*d, key_[kStream]); v && !as_bits64(*v, &seg.stream)) {
        bad_record(at, "'stream' is not an integer");
        continue;
      }
      if (auto v = m_.get(*d, key_[kSegmentType]); v && v->kind == Kind::kStr) seg.segment_type = m_.text(*v);
      if (auto v = m_.get(*d, key_[kIsExpandable]); v && (v->kind == Kind::kBool || v->kind == Kind::kInt))
        seg.expandable = v->bits != 0;
      if (auto blocks = m_.get(*d, key_[kBlocks])) read_blocks(*blocks, at, &seg);
      trace_.segments.push_back(std::move(seg));
    }
  }

  void read_blocks(Value list_value, const std::string& seg_at, SnapshotSegment* seg) {
    const Container* list = m_.container(list_value);
    if (list == nullptr || list->kind != Kind::kList) return bad_record(seg_at + ".blocks", "is not a list");
    std::uint64_t next = seg->address;  // where the next block starts, for files without block addresses
    for (std::size_t b = 0; b < list->size(); ++b) {
      const std::string at = fmt::format("{}.blocks[{}]", seg_at, b);
      const Container* d = m_.container(list->at(b));
      if (d == nullptr || d->kind != Kind::kDict) {
        bad_record(at, "is not a dict");
        continue;
      }
      SnapshotBlock block;
      auto size = m_.get(*d, key_[kSize]);
      if (!size || !as_size(*size, &block.size)) {
        bad_record(at, "'size' is missing or not a non-negative integer");
        continue;
      }
      block.address = next;
      if (auto v = m_.get(*d, key_[kAddress]); v && !as_bits64(*v, &block.address)) {
        bad_record(at, "'address' is not an integer");
        continue;
      }
      next = block.address + static_cast<std::uint64_t>(block.size);
      block.requested_size = block.size;
      std::optional<Value> frames = m_.get(*d, key_[kFrames]);
      // 1.13: {"history": [{"addr", "frames", "real_size"}]}; memory_viz
      // reads the first record (_block_extra_legacy).
      if (auto history = m_.get(*d, key_[kHistory]); history && !frames) {
        const Container* h = m_.container(*history);
        const Container* first = h && h->kind == Kind::kList && h->size() > 0 ? m_.container(h->at(0)) : nullptr;
        if (first && first->kind == Kind::kDict) {
          frames = m_.get(*first, key_[kFrames]);
          if (auto real = m_.get(*first, key_[kRealSize])) as_size(*real, &block.requested_size);
        }
      }
      if (auto v = m_.get(*d, key_[kRequestedSize]); v && !as_size(*v, &block.requested_size)) {
        bad_record(at, "'requested_size' is not a non-negative integer");
        continue;
      }
      if (auto v = m_.get(*d, key_[kState]); v && v->kind == Kind::kStr) block.state = m_.text(*v);
      if (frames && !context_of(*frames, &block.context)) {
        bad_record(at, "'frames' is not a list of {filename, line, name} dicts");
        continue;
      }
      seg->blocks.push_back(std::move(block));
    }
  }

  // device_traces[d] lists device d's entries, already converted: opaque ids.
  void read_device_traces(Value traces_value) {
    const Container* outer = m_.container(traces_value);
    if (outer == nullptr || outer->kind != Kind::kList) {
      trace_.events.clear();
      return bad_record("device_traces", "is not a list");
    }
    // Pass 1: do the ids come in increasing order? Then the events move down
    // in place; otherwise (a hand-made pickle) they are copied.
    bool in_order = true;
    std::uint64_t next = 0;
    visit(*outer, [&](std::size_t, std::size_t, Value item) {
      if (item.kind != Kind::kOpaque) return;
      if (item.bits < next) in_order = false;
      next = item.bits + 1;
    });
    std::vector<Event> copied;
    std::size_t kept = 0;
    visit(*outer, [&](std::size_t d, std::size_t i, Value item) {
      if (item.kind != Kind::kOpaque) {
        if (salvaging_ && item.kind == Kind::kDict) return;  // counted in incomplete_
        return bad_record(fmt::format("device_traces[{}][{}]", d, i),
                          fmt::format("is a {}, not a trace entry dict with an 'action'",
                                      item.kind == Kind::kDict ? "dict without 'action'" : "value of another type"));
      }
      const auto id = static_cast<std::size_t>(item.bits);
      const std::uint8_t f = flags_[id];
      if (f & (kUnknownAction | kInvalid)) return;  // counted when met
      if (!(f & kHasSize) || !(f & kHasAddr)) {
        return bad_record(fmt::format("device_traces[{}][{}]", d, i),
                          !(f & kHasSize) ? "has no 'size'" : "has no 'addr' (nor 'device_free')");
      }
      if (d >= kMaxDevices) {
        return bad_record(fmt::format("device_traces[{}]", d),
                          fmt::format("is past the {} devices gpumem reads", kMaxDevices));
      }
      Event e = trace_.events[id];
      e.device = static_cast<std::int32_t>(d);
      if (in_order) {
        trace_.events[kept] = e;  // kept <= id: never overwrites one not yet read
      } else {
        copied.push_back(e);
      }
      ++kept;
    });
    if (in_order) {
      trace_.events.resize(kept);
    } else {
      trace_.events = std::move(copied);
    }
    flags_.clear();
    flags_.shrink_to_fit();
  }

  template <typename Fn>
  void visit(const Container& outer, Fn&& fn) {
    for (std::size_t d = 0; d < outer.size(); ++d) {
      const Container* inner = m_.container(outer.at(d));
      if (inner == nullptr || inner->kind != Kind::kList) {
        report_not_a_list(d);
        continue;
      }
      for (std::size_t i = 0; i < inner->size(); ++i) fn(d, i, inner->at(i));
    }
  }

  // visit runs twice; a device entry that is not a list is reported once.
  void report_not_a_list(std::size_t d) {
    if (d < reported_devices_.size() && reported_devices_[d]) return;
    if (d >= reported_devices_.size()) reported_devices_.resize(d + 1, false);
    reported_devices_[d] = true;
    bad_record(fmt::format("device_traces[{}]", d), "is not a list");
  }

  Trace trace_;
  Machine m_;
  bool strict_;
  std::uint32_t key_[kKeyCount] = {};
  std::uint32_t first_action_ = 0;
  std::vector<std::uint8_t> flags_;  // per converted entry
  std::vector<FrameFields> frames_;  // decoded frame dicts
  std::vector<bool> reported_devices_;
  bool salvaging_ = false;
  std::vector<const Container*> closed_by_salvage_;  // a handful: the dicts open when the input stopped
  std::uint64_t incomplete_ = 0;                     // entries the input stopped inside
  std::uint64_t unknown_actions_ = 0;
  std::uint64_t bad_records_ = 0;
  std::string first_unknown_;
  std::string first_bad_;
};

// ---- writing ----

class SnapshotWriter {
 public:
  SnapshotWriter(const Trace& trace, std::ostream& out, int protocol)
      : trace_(trace), w_(out, protocol), context_memo_(trace.contexts.size(), -1) {}

  // host_devices_from: the first device number given to host memory
  // (devices < 0), or -1 when there is none.
  void write(std::int64_t host_devices_from) {
    w_.empty_dict();
    w_.mark();
    w_.string("segments");
    write_segments();
    w_.string("device_traces");
    write_device_traces();
    if (host_devices_from >= 0) {
      w_.string(kHostDevicesKey);
      w_.integer(host_devices_from);
    }
    w_.setitems();
    w_.stop();
  }

 private:
  // Lists go out as pickle.py's _batch_appends writes them: MARK, up to
  // 1000 items, APPENDS.
  class Batch {
   public:
    explicit Batch(pickle::Writer& w) : w_(w) {}
    void item() {
      if (n_ % 1000 == 0) {
        if (n_ > 0) w_.appends();
        w_.mark();
      }
      ++n_;
    }
    void end() {
      if (n_ > 0) w_.appends();
    }

   private:
    pickle::Writer& w_;
    std::size_t n_ = 0;
  };

  void frame(std::string_view filename, std::int64_t line, std::string_view name) {
    w_.empty_dict();
    w_.mark();
    w_.string("filename");
    w_.string(filename);
    w_.string("line");
    w_.integer(line);
    w_.string("name");
    w_.string(name);
    w_.setitems();
  }

  // Each context's list is written once and repeated from the memo, as
  // PyTorch shares one list between all entries with the same stack.
  void frames(std::uint32_t context) {
    if (context >= trace_.contexts.size()) context = 0;
    if (context_memo_[context] >= 0) return w_.get(static_cast<std::uint32_t>(context_memo_[context]));
    w_.empty_list();
    context_memo_[context] = w_.put();
    const Context& c = trace_.contexts[context];
    Batch batch(w_);
    if (!c.tag.empty()) {
      batch.item();
      frame(kTagFile, 0, c.tag);
    }
    for (const Frame& f : c.frames) {
      batch.item();
      frame(f.filename, f.line, f.name);
    }
    batch.end();
  }

  void write_segments() {
    w_.empty_list();
    Batch batch(w_);
    for (const SnapshotSegment& seg : trace_.segments) {
      batch.item();
      // The sums PyTorch's snapshot() keeps per segment
      // (CUDACachingAllocator.cpp): allocated blocks, active blocks (allocated
      // or waiting on a stream), and what active blocks were asked for.
      std::int64_t allocated = 0, active = 0, requested = 0;
      for (const SnapshotBlock& b : seg.blocks) {
        const bool is_allocated = b.state == "active_allocated";
        const bool is_active = is_allocated || b.state == "active_pending_free";
        if (is_allocated) allocated += b.size;
        if (is_active) {
          active += b.size;
          requested += b.requested_size;
        }
      }
      w_.empty_dict();
      w_.mark();
      w_.string("device");
      w_.integer(seg.device);
      w_.string("address");
      w_.unsigned_integer(seg.address);
      w_.string("total_size");
      w_.integer(seg.total_size);
      w_.string("allocated_size");
      w_.integer(allocated);
      w_.string("active_size");
      w_.integer(active);
      w_.string("requested_size");
      w_.integer(requested);
      w_.string("stream");
      w_.unsigned_integer(seg.stream);
      w_.string("segment_type");
      w_.string(seg.segment_type);
      w_.string("is_expandable");
      w_.boolean(seg.expandable);
      w_.string("frames");
      frames(0);
      w_.string("blocks");
      w_.empty_list();
      Batch blocks(w_);
      for (const SnapshotBlock& b : seg.blocks) {
        blocks.item();
        w_.empty_dict();
        w_.mark();
        w_.string("address");
        w_.unsigned_integer(b.address);
        w_.string("size");
        w_.integer(b.size);
        w_.string("requested_size");
        w_.integer(b.requested_size);
        w_.string("state");
        w_.string(b.state);
        w_.string("frames");
        frames(b.context);
        w_.setitems();
      }
      blocks.end();
      w_.setitems();
    }
    batch.end();
  }

  void entry(const Event& e) {
    w_.empty_dict();
    w_.mark();
    w_.string("action");
    w_.string(action_name(e.action));
    w_.string(e.action == Action::kOom ? "device_free" : "addr");
    w_.unsigned_integer(e.address);
    w_.string("size");
    w_.integer(e.size);
    w_.string("stream");
    w_.unsigned_integer(e.stream);
    if (e.time_ns != kUnknown) {
      w_.string("time_us");
      w_.integer(e.time_ns / 1000);
    }
    w_.string("frames");
    frames(e.context);
    w_.setitems();
  }

  // One list per device 0..max; events keep their order within a device.
  // Devices outside [0, kMaxDevices) have no list in PyTorch's format.
  void write_device_traces() {
    const std::vector<Event>& events = trace_.events;
    auto usable = [](const Event& e) { return e.device >= 0 && static_cast<std::size_t>(e.device) < kMaxDevices; };
    std::size_t devices = 0;
    bool grouped = true;  // already in device order, as every reader leaves them
    std::int32_t last = 0;
    for (const Event& e : events) {
      if (!usable(e)) continue;
      devices = std::max(devices, static_cast<std::size_t>(e.device) + 1);
      if (e.device < last) grouped = false;
      last = e.device;
    }
    std::vector<std::size_t> order;  // event indices by device, when not grouped
    std::vector<std::size_t> starts(devices + 1, 0);
    if (!grouped) {
      for (const Event& e : events)
        if (usable(e)) ++starts[static_cast<std::size_t>(e.device) + 1];
      for (std::size_t d = 0; d < devices; ++d) starts[d + 1] += starts[d];
      order.resize(starts[devices]);
      std::vector<std::size_t> fill(starts.begin(), starts.end() - 1);
      for (std::size_t i = 0; i < events.size(); ++i)
        if (usable(events[i])) order[fill[static_cast<std::size_t>(events[i].device)]++] = i;
    }
    w_.empty_list();
    Batch outer(w_);
    std::size_t next = 0;  // grouped: the next event to look at
    for (std::size_t d = 0; d < devices; ++d) {
      outer.item();
      w_.empty_list();
      Batch inner(w_);
      if (grouped) {
        for (; next < events.size(); ++next) {
          const Event& e = events[next];
          if (!usable(e)) continue;
          if (static_cast<std::size_t>(e.device) != d) break;
          inner.item();
          entry(e);
        }
      } else {
        for (std::size_t k = starts[d]; k < starts[d + 1]; ++k) {
          inner.item();
          entry(events[order[k]]);
        }
      }
      inner.end();
    }
    outer.end();
  }

  const Trace& trace_;
  pickle::Writer w_;
  std::vector<std::int64_t> context_memo_;
};

}  // namespace

Trace read_pytorch_snapshot(std::string_view data, const std::string& name, const ReadOptions& options) {
  Trace trace = SnapshotReader(data, name, options).read();
  // Expandable segments say the job ran with expandable_segments:True; the
  // format's row says "pytorch" otherwise (formats.cpp).
  if (std::any_of(trace.segments.begin(), trace.segments.end(), [](const SnapshotSegment& s) { return s.expandable; }))
    trace.recorded_under = "pytorch-expandable";
  return trace;
}

void write_pytorch_snapshot(const Trace& trace, std::ostream& out, int protocol) {
  // PyTorch's format numbers devices from 0: host memory (device -1, from
  // torch.profiler) goes after the GPUs, so a CPU-only trace becomes device 0
  // for memory_viz, and the snapshot says where host devices start (a key
  // memory_viz ignores) so that reading it back restores device -1.
  std::int32_t gpus = 0;
  bool host = false;
  for (const Event& e : trace.events) {
    if (e.device >= 0)
      gpus = std::max(gpus, e.device + 1);
    else
      host = true;
  }
  for (const SnapshotSegment& s : trace.segments) {
    if (s.device >= 0)
      gpus = std::max(gpus, s.device + 1);
    else
      host = true;
  }
  if (!host) {
    SnapshotWriter(trace, out, protocol).write(-1);
    return;
  }
  Trace renumbered = trace;
  for (Event& e : renumbered.events)
    if (e.device < 0) e.device = gpus + (-1 - e.device);
  for (SnapshotSegment& s : renumbered.segments)
    if (s.device < 0) s.device = gpus + (-1 - s.device);
  SnapshotWriter(renumbered, out, protocol).write(gpus);
}

bool is_pytorch_snapshot(std::string_view head) { return !head.empty() && static_cast<unsigned char>(head[0]) == 0x80; }

}  // namespace gpumem::trace
