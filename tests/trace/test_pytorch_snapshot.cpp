// PyTorch memory snapshots: the fixtures tools/make_snapshot_fixtures.py
// wrote with Python's pickle (protocols 2 to 5) and in torch::jit::Pickler's
// layout, read value by value; write + read round trips; and hostile input:
// truncation at every byte, code-loading opcodes, huge lengths, bad memo
// indices, deep nesting.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "gpumem/common/error.h"
#include "gpumem/trace/pytorch_snapshot.h"
#include "gpumem/trace/trace.h"
#include "trace/pickle_writer.h"

namespace gpumem::trace {
namespace {

constexpr std::uint64_t kBase = 0x7F3A00000000;
constexpr std::uint64_t kBase2 = 0x7F4000000000;
constexpr std::int64_t kT0 = 1'700'000'000'000'000;  // time_us
constexpr std::uint64_t kBigStream = 94'000'000'000'000;

std::string fixture_path(const std::string& name) {
  return std::string(GPUMEM_SOURCE_DIR) + "/tests/data/traces/" + name;
}

std::string slurp(const std::string& name) {
  std::ifstream in(fixture_path(name), std::ios::binary);
  EXPECT_TRUE(in) << name;
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

Trace read(const std::string& data, bool strict = true) {
  return read_pytorch_snapshot(data, "t.pickle", ReadOptions{.strict = strict});
}

// The InputError's message, or "" when none was thrown.
std::string error_of(const std::string& data, bool strict = true) {
  try {
    read(data, strict);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

const std::vector<Frame> kStackA = {{"/usr/lib/python3/dist-packages/torch/nn/modules/linear.py", 114, "forward"},
                                    {"/home/user/train.py", 42, "train_step"}};
const std::vector<Frame> kStackB = {{"/home/user/model.py", 7, "make_buffer"},
                                    {"/home/user/train.py", 42, "train_step"}};

struct Expected {
  Action action;
  std::int32_t device;
  std::uint64_t address;
  std::int64_t size;
  std::uint64_t stream;
  std::int64_t time_us;  // kUnknown: none
  const std::vector<Frame>* frames;
};

// The snapshot make_snapshot_fixtures.py writes, event by event.
const std::vector<Expected> kEvents = {
    {Action::kSegmentAlloc, 0, kBase, 2097152, 0, kT0, &kStackB},
    {Action::kAlloc, 0, kBase, 512, 0, kT0 + 1, &kStackA},
    {Action::kAlloc, 0, kBase + 512, 1024, 0, kT0 + 2, &kStackB},
    {Action::kFreeRequested, 0, kBase, 512, 0, kT0 + 3, &kStackA},
    {Action::kFreeCompleted, 0, kBase, 512, 0, kT0 + 4, &kStackA},
    {Action::kSegmentMap, 0, kBase2, 20971520, kBigStream, kT0 + 5, &kStackA},
    {Action::kSegmentUnmap, 0, kBase2, 20971520, kBigStream, kT0 + 6, &kStackA},
    {Action::kSnapshot, 0, 0, 1024, 0, kT0 + 7, nullptr},
    {Action::kOom, 0, 1073741824, 8589934592, 0, kT0 + 8, &kStackB},  // address: device_free
    {Action::kAlloc, 0, kBase + 1536, 256, 0, kUnknown, &kStackB},
    {Action::kSegmentAlloc, 2, kBase2, 20971520, 7, kT0 + 100, &kStackA},
    {Action::kAlloc, 2, kBase2, 20971520, 7, kT0 + 101, &kStackA},
    {Action::kFreeRequested, 2, kBase2, 20971520, 7, kT0 + 102, &kStackA},
};

void expect_events(const Trace& t, const std::vector<Expected>& expected, const std::string& label) {
  ASSERT_EQ(t.events.size(), expected.size()) << label;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const Event& e = t.events[i];
    const Expected& x = expected[i];
    SCOPED_TRACE(label + ": event " + std::to_string(i));
    EXPECT_EQ(e.action, x.action);
    EXPECT_EQ(e.device, x.device);
    EXPECT_EQ(e.address, x.address);
    EXPECT_EQ(e.size, x.size);
    EXPECT_EQ(e.stream, x.stream);
    EXPECT_EQ(e.time_ns, x.time_us == kUnknown ? kUnknown : x.time_us * 1000);
    EXPECT_EQ(e.total_allocated, kUnknown);
    ASSERT_LT(e.context, t.contexts.size());
    if (x.frames == nullptr) {
      EXPECT_EQ(e.context, 0u);
    } else {
      EXPECT_EQ(t.contexts[e.context].tag, "");
      EXPECT_EQ(t.contexts[e.context].frames, *x.frames);
    }
  }
}

void expect_segments(const Trace& t, const std::string& label) {
  SCOPED_TRACE(label);
  ASSERT_EQ(t.segments.size(), 2u);
  const SnapshotSegment& s0 = t.segments[0];
  EXPECT_EQ(s0.device, 0);
  EXPECT_EQ(s0.address, kBase);
  EXPECT_EQ(s0.total_size, 2097152);
  EXPECT_EQ(s0.stream, 0u);
  EXPECT_EQ(s0.segment_type, "small");
  EXPECT_FALSE(s0.expandable);
  ASSERT_EQ(s0.blocks.size(), 4u);
  EXPECT_EQ(s0.blocks[0].address, kBase);
  EXPECT_EQ(s0.blocks[0].size, 512);
  EXPECT_EQ(s0.blocks[0].requested_size, 0);
  EXPECT_EQ(s0.blocks[0].state, "inactive");
  EXPECT_EQ(s0.blocks[0].context, 0u);
  EXPECT_EQ(s0.blocks[1].address, kBase + 512);
  EXPECT_EQ(s0.blocks[1].size, 1024);
  EXPECT_EQ(s0.blocks[1].requested_size, 1000);
  EXPECT_EQ(s0.blocks[1].state, "active_allocated");
  EXPECT_EQ(t.contexts[s0.blocks[1].context].frames, kStackB);
  EXPECT_EQ(s0.blocks[2].address, kBase + 1536);
  EXPECT_EQ(s0.blocks[2].requested_size, 200);
  EXPECT_EQ(s0.blocks[3].address, kBase + 1792);
  EXPECT_EQ(s0.blocks[3].size, 2097152 - 1792);
  const SnapshotSegment& s1 = t.segments[1];
  EXPECT_EQ(s1.device, 2);
  EXPECT_EQ(s1.address, kBase2);
  EXPECT_EQ(s1.total_size, 20971520);
  EXPECT_EQ(s1.stream, 7u);
  EXPECT_EQ(s1.segment_type, "large");
  EXPECT_TRUE(s1.expandable);
  ASSERT_EQ(s1.blocks.size(), 1u);
  EXPECT_EQ(s1.blocks[0].state, "active_pending_free");
  EXPECT_EQ(t.contexts[s1.blocks[0].context].frames, kStackA);
}

bool same_events(const Trace& a, const Trace& b) {
  if (a.events.size() != b.events.size()) return false;
  for (std::size_t i = 0; i < a.events.size(); ++i) {
    const Event& x = a.events[i];
    const Event& y = b.events[i];
    if (x.action != y.action || x.device != y.device || x.address != y.address || x.size != y.size ||
        x.stream != y.stream || x.time_ns != y.time_ns || !(a.contexts[x.context] == b.contexts[y.context]))
      return false;
  }
  return true;
}

std::string written(const Trace& t, int protocol) {
  std::ostringstream out;
  write_pytorch_snapshot(t, out, protocol);
  return out.str();
}

// Raw pickle bytes for the hostile cases.
struct Bytes {
  std::string s = std::string("\x80\x02", 2);
  Bytes& op(char c) {
    s.push_back(c);
    return *this;
  }
  Bytes& op(unsigned char c) { return op(static_cast<char>(c)); }
  Bytes& u8(unsigned v) {
    s.push_back(static_cast<char>(v & 0xff));
    return *this;
  }
  Bytes& u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    return *this;
  }
  Bytes& u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    return *this;
  }
  Bytes& str(const std::string& text) {  // BINUNICODE
    op('X').u32(static_cast<std::uint32_t>(text.size()));
    s += text;
    return *this;
  }
  Bytes& raw(const std::string& text) {
    s += text;
    return *this;
  }
};

// {"segments": [], "device_traces": [[ENTRY]]}, ENTRY's pairs written by fn.
template <typename Fn>
std::string one_entry(Fn&& fn) {
  Bytes b;
  b.op('}').op('(').str("segments").op(']').str("device_traces").op(']').op(']').op('}').op('(');
  fn(b);
  b.op('u').op('a').op('a').op('u').op('.');
  return b.s;
}

// ---- the fixtures ----

TEST(PytorchSnapshot, ReadsEveryProtocolAndTheJitLayout) {
  for (const char* name : {"snapshot_p2.pickle", "snapshot_p3.pickle", "snapshot_p4.pickle", "snapshot_p5.pickle",
                           "snapshot_jit.pickle"}) {
    const Trace t = read(slurp(name));
    EXPECT_EQ(t.format, "pytorch-snapshot");
    EXPECT_EQ(t.source, "t.pickle");
    EXPECT_TRUE(t.warnings.empty()) << name << ": " << (t.warnings.empty() ? "" : t.warnings[0]);
    EXPECT_EQ(t.skipped_records, 0u);
    expect_events(t, kEvents, name);
    expect_segments(t, name);
    // Shared stacks intern to one context each: none, A, B.
    EXPECT_EQ(t.contexts.size(), 3u) << name;
  }
}

TEST(PytorchSnapshot, ReadTraceDetectsTheFormat) {
  const Trace t = read_trace(fixture_path("snapshot_p4.pickle"), ReadOptions{.strict = true});
  EXPECT_EQ(t.format, "pytorch-snapshot");
  EXPECT_EQ(t.events.size(), kEvents.size());
}

TEST(PytorchSnapshot, LegacyBlocksWithoutAddressesOrFrames) {
  const Trace t = read(slurp("snapshot_legacy.pickle"));
  ASSERT_EQ(t.segments.size(), 1u);
  const SnapshotSegment& s = t.segments[0];
  EXPECT_FALSE(s.expandable);
  ASSERT_EQ(s.blocks.size(), 3u);
  // Addresses: the segment's plus the sizes before.
  EXPECT_EQ(s.blocks[0].address, kBase);
  EXPECT_EQ(s.blocks[1].address, kBase + 512);
  EXPECT_EQ(s.blocks[2].address, kBase + 1536);
  // No requested_size: the block's size; "history": its real_size and frames.
  EXPECT_EQ(s.blocks[0].requested_size, 512);
  EXPECT_EQ(s.blocks[0].context, 0u);
  EXPECT_EQ(s.blocks[1].requested_size, 1000);
  EXPECT_EQ(t.contexts[s.blocks[1].context].frames, kStackB);
  EXPECT_EQ(s.blocks[2].requested_size, 0);
  expect_events(t,
                {{Action::kSegmentAlloc, 0, kBase, 2097152, 0, kUnknown, &kStackB},
                 {Action::kAlloc, 0, kBase + 512, 1024, 0, kUnknown, &kStackB}},
                "legacy");
}

TEST(PytorchSnapshot, BareListOfSegments) {
  const Trace t = read(slurp("segments_only.pickle"));
  EXPECT_TRUE(t.events.empty());
  expect_segments(t, "segments_only");
}

TEST(PytorchSnapshot, UnknownActionStrictFailsLenientSkips) {
  const std::string data = slurp("unknown_action.pickle");
  const std::string err = error_of(data);
  EXPECT_NE(err.find("t.pickle: byte "), std::string::npos) << err;
  EXPECT_NE(err.find("event 1: unknown action 'defragment'"), std::string::npos) << err;
  const Trace t = read(data, false);
  ASSERT_EQ(t.events.size(), 2u);
  EXPECT_EQ(t.events[0].action, Action::kAlloc);
  EXPECT_EQ(t.events[1].action, Action::kFreeCompleted);
  EXPECT_EQ(t.events[1].time_ns, (kT0 + 2) * 1000);
  EXPECT_EQ(t.skipped_records, 1u);
  ASSERT_EQ(t.warnings.size(), 1u);
  EXPECT_NE(t.warnings[0].find("unknown action 'defragment'"), std::string::npos) << t.warnings[0];
  EXPECT_NE(t.warnings[0].find("skipped 1 trace entries"), std::string::npos) << t.warnings[0];
}

// ---- writing ----

TEST(PytorchSnapshot, RoundTripsTheFixture) {
  const Trace t = read(slurp("snapshot_p4.pickle"));
  for (int protocol : {2, 4}) {
    const std::string out = written(t, protocol);
    EXPECT_EQ(static_cast<unsigned char>(out[0]), 0x80);
    EXPECT_EQ(out[1], static_cast<char>(protocol));
    // Protocol 4 comes in frames; protocol 2 has none.
    EXPECT_EQ(static_cast<unsigned char>(out[2]) == 0x95, protocol == 4);
    const Trace back = read(out);
    EXPECT_TRUE(same_events(t, back)) << "protocol " << protocol;
    expect_events(back, kEvents, "round trip");
    expect_segments(back, "round trip");
    EXPECT_TRUE(back.warnings.empty());
  }
}

TEST(PytorchSnapshot, WritesTagsUngroupedDevicesAndHugeNumbers) {
  Trace t;
  const std::uint32_t tagged = t.intern(Context{"conv2d", {{"/m.py", 3, "f"}}});
  const std::uint32_t bare = t.intern(Context{"matmul", {}});
  auto add = [&](Action a, std::int32_t device, std::uint64_t address, std::int64_t size, std::uint64_t stream,
                 std::int64_t time_ns, std::uint32_t context) {
    Event e;
    e.action = a;
    e.device = device;
    e.address = address;
    e.size = size;
    e.stream = stream;
    e.time_ns = time_ns;
    e.context = context;
    t.events.push_back(e);
  };
  add(Action::kAlloc, 1, 0xFFFF'FFFF'FFFF'F000u, 100, 0xFFFF'FFFF'FFFF'FFFFu, 5000, tagged);
  add(Action::kAlloc, 0, 0x10, 0, 0, kUnknown, bare);
  add(Action::kFreeCompleted, 1, 0xFFFF'FFFF'FFFF'F000u, 100, 3, 7000, 0);
  add(Action::kOom, 3, 12345, std::int64_t{1} << 40, 0, 9000, tagged);
  add(Action::kAlloc, -1, 0x20, 1, 0, 0, 0);  // host memory: numbered after the GPUs
  t.segments.push_back(
      SnapshotSegment{1,
                      0x1000,
                      4096,
                      2,
                      "large",
                      true,
                      {{0x1000, 1024, 1000, "active_allocated", tagged}, {0x1400, 3072, 0, "inactive", 0}}});
  for (int protocol : {2, 4}) {
    const Trace back = read(written(t, protocol));
    ASSERT_EQ(back.events.size(), 5u);
    // Written as device 4 (GPUs 0..3, then the host), read back as host memory.
    EXPECT_EQ(back.events[4].device, -1);
    EXPECT_EQ(back.events[4].address, 0x20u);
    // Grouped by device, in order within each.
    EXPECT_EQ(back.events[0].device, 0);
    EXPECT_EQ(back.events[0].address, 0x10u);
    EXPECT_EQ(back.events[0].time_ns, kUnknown);
    EXPECT_EQ(back.contexts[back.events[0].context], (Context{"matmul", {}}));
    EXPECT_EQ(back.events[1].device, 1);
    EXPECT_EQ(back.events[1].address, 0xFFFF'FFFF'FFFF'F000u);
    EXPECT_EQ(back.events[1].stream, 0xFFFF'FFFF'FFFF'FFFFu);
    EXPECT_EQ(back.events[1].time_ns, 5000);
    EXPECT_EQ(back.contexts[back.events[1].context], (Context{"conv2d", {{"/m.py", 3, "f"}}}));
    EXPECT_EQ(back.events[2].action, Action::kFreeCompleted);
    EXPECT_EQ(back.events[2].context, 0u);
    EXPECT_EQ(back.events[3].device, 3);
    EXPECT_EQ(back.events[3].action, Action::kOom);
    EXPECT_EQ(back.events[3].address, 12345u);
    EXPECT_EQ(back.events[3].size, std::int64_t{1} << 40);
    ASSERT_EQ(back.segments.size(), 1u);
    EXPECT_EQ(back.segments[0].blocks[1].address, 0x1400u);
    EXPECT_EQ(back.contexts[back.segments[0].blocks[0].context].tag, "conv2d");
  }
}

TEST(PytorchSnapshot, WriterFramesLargeOutputs) {
  // Over 64 KiB: several FRAMEs, each read through.
  Trace t;
  for (int i = 0; i < 20000; ++i) {
    Event e;
    e.action = i % 2 ? Action::kFreeCompleted : Action::kAlloc;
    e.address = 0x7f0000000000u + static_cast<std::uint64_t>(i / 2) * 512;
    e.size = 512;
    e.time_ns = i * 1000;
    e.context = t.intern(Context{"", {{"/a.py", i % 7, "g"}}});
    t.events.push_back(e);
  }
  const std::string out = written(t, 4);
  EXPECT_GT(out.size(), 3u * 64 * 1024);
  const Trace back = read(out);
  EXPECT_TRUE(same_events(t, back));
  EXPECT_THROW(pickle::Writer(std::cout, 3), std::invalid_argument);
}

// ---- hostile input ----

TEST(PytorchSnapshot, TruncatedAtEveryByte) {
  for (const char* name : {"snapshot_p2.pickle", "snapshot_p4.pickle", "snapshot_jit.pickle"}) {
    const std::string full = slurp(name);
    const Trace whole = read(full);
    for (std::size_t n = 0; n < full.size(); ++n) {
      const std::string cut = full.substr(0, n);
      SCOPED_TRACE(std::string(name) + " cut at " + std::to_string(n));
      const std::string err = error_of(cut, true);
      ASSERT_NE(err.find("t.pickle: byte "), std::string::npos) << err;
      Trace t;
      try {
        t = read(cut, false);
      } catch (const InputError& e) {
        // Only before the top-level dict exists is there nothing to keep.
        EXPECT_LT(n, 16u) << e.what();
        continue;
      }
      ASSERT_FALSE(t.warnings.empty());
      EXPECT_NE(t.warnings[0].find("; kept the " + std::to_string(t.events.size()) + " events read before it"),
                std::string::npos)
          << t.warnings[0];
      // What is kept is exact: a prefix of the whole trace.
      ASSERT_LE(t.events.size(), whole.events.size());
      for (std::size_t i = 0; i < t.events.size(); ++i) {
        const Event& x = t.events[i];
        const Event& y = whole.events[i];
        ASSERT_TRUE(x.action == y.action && x.device == y.device && x.address == y.address && x.size == y.size &&
                    x.stream == y.stream && x.time_ns == y.time_ns &&
                    t.contexts[x.context] == whole.contexts[y.context])
            << "event " << i;
      }
      // And a segment is kept whole or not at all.
      ASSERT_LE(t.segments.size(), whole.segments.size());
      for (std::size_t i = 0; i < t.segments.size(); ++i) {
        EXPECT_EQ(t.segments[i].address, whole.segments[i].address);
        EXPECT_EQ(t.segments[i].blocks.size(), whole.segments[i].blocks.size()) << "segment " << i;
      }
    }
  }
}

TEST(PytorchSnapshot, TruncationWarningNamesTheByte) {
  const std::string full = slurp("snapshot_p4.pickle");
  const std::string cut = full.substr(0, full.size() - 40);
  const Trace t = read(cut, false);
  ASSERT_FALSE(t.warnings.empty());
  EXPECT_EQ(t.warnings[0].rfind("t.pickle: byte ", 0), 0u) << t.warnings[0];
  EXPECT_GT(t.events.size(), 5u);
}

TEST(PytorchSnapshot, CodeLoadingOpcodesAreRefusedEvenLeniently) {
  const std::string global = Bytes().raw("cos\nsystem\n").str("echo hi").op('\x85').op('R').op('.').s;
  for (bool strict : {true, false}) {
    const std::string err = error_of(global, strict);
    EXPECT_NE(err.find("t.pickle: byte 2: GLOBAL 'os.system': a pickle that needs code to load is not a snapshot"),
              std::string::npos)
        << err;
  }
  struct Case {
    std::string data;
    std::string name;
  };
  const std::vector<Case> cases = {
      {Bytes().op('N').op(')').op('R').op('.').s, "REDUCE"},
      {Bytes().op('}').op('}').op('b').op('.').s, "BUILD"},
      {Bytes().str("os").str("system").op(static_cast<unsigned char>(0x93)).op('.').s, "STACK_GLOBAL 'os.system'"},
      {Bytes().op('N').op(')').op(static_cast<unsigned char>(0x81)).op('.').s, "NEWOBJ"},
      {Bytes().op('(').raw("ios\nsystem\n").op('.').s, "INST"},
      {Bytes().op('(').op('N').op('o').op('.').s, "OBJ"},
      {Bytes().op('N').op('Q').op('.').s, "BINPERSID"},
      {Bytes().raw("P1\n.").s, "PERSID"},
      {Bytes().op(static_cast<unsigned char>(0x82)).u8(1).op('.').s, "EXT1"},
      {Bytes().op(static_cast<unsigned char>(0x97)).op('.').s, "NEXT_BUFFER"},
  };
  for (const Case& c : cases) {
    const std::string err = error_of(c.data, false);
    EXPECT_NE(err.find(c.name + ": a pickle that needs code to load is not a snapshot"), std::string::npos) << err;
  }
  // In the middle of a real snapshot, too: nothing is salvaged.
  std::string data = slurp("snapshot_p2.pickle");
  data.insert(data.find("}q", data.size() / 2), "cos\nsystem\n");  // before an EMPTY_DICT opcode
  EXPECT_NE(error_of(data, false).find("needs code"), std::string::npos);
}

TEST(PytorchSnapshot, CorruptOpcodes) {
  EXPECT_NE(error_of("hello").find("t.pickle: byte 0: not a pickle"), std::string::npos);
  EXPECT_NE(error_of("").find("byte 0: not a pickle"), std::string::npos);
  EXPECT_NE(error_of(std::string("\x80\x06N.", 4)).find("pickle protocol 6"), std::string::npos);
  EXPECT_NE(error_of(Bytes().op('\xff').s).find("byte 2: unknown opcode 0xff"), std::string::npos);
  EXPECT_NE(error_of(Bytes().op('K').u8(1).op('.').s).find("holds a scalar, not a snapshot dict"), std::string::npos);
  EXPECT_NE(error_of(Bytes().op('a').s).find("APPEND needs 2 values"), std::string::npos);
  EXPECT_NE(error_of(Bytes().op('e').s).find("APPENDS without a MARK"), std::string::npos);
  EXPECT_NE(error_of(Bytes().op('K').u8(1).op('K').u8(2).op('a').s).find("APPEND to a int, not a list"),
            std::string::npos);
  EXPECT_NE(error_of(Bytes().op(']').op('(').op('N').op('u').s).find("odd number of items"), std::string::npos);
  EXPECT_NE(error_of(Bytes().op(']').op('(').op('N').op('N').op('u').s).find("SETITEMS on a list, not a dict"),
            std::string::npos);
  EXPECT_NE(error_of(Bytes().raw("S'x'\n.").s).find("STRING (a protocol 0 text opcode)"), std::string::npos);
  // A corrupt byte inside the real thing: rejected strictly, salvaged leniently.
  std::string data = slurp("snapshot_p4.pickle");
  std::size_t at = 0;
  for (int i = 0; i < 12; ++i) at = data.find("}\x94(", at + 1);  // EMPTY_DICT MEMOIZE MARK: an entry
  ASSERT_NE(at, std::string::npos);
  data[at] = '\xff';
  EXPECT_NE(error_of(data).find("unknown opcode 0xff"), std::string::npos);
  const Trace t = read(data, false);
  ASSERT_FALSE(t.warnings.empty());
  EXPECT_NE(t.warnings[0].find("unknown opcode 0xff; kept the"), std::string::npos) << t.warnings[0];
}

TEST(PytorchSnapshot, HugeLengthsAreCheckedAgainstTheFile) {
  EXPECT_NE(error_of(Bytes().op('X').u32(0xFFFFFFFFu).raw("abc").s)
                .find("byte 2: BINUNICODE of 4294967295 bytes, but only 3 remain in the file"),
            std::string::npos);
  EXPECT_NE(error_of(Bytes().op('\x8d').u64(std::uint64_t{1} << 63).s).find("BINUNICODE8 of 9223372036854775808 bytes"),
            std::string::npos);
  EXPECT_NE(error_of(Bytes().op('\x8e').u64(~std::uint64_t{0}).s).find("BINBYTES8 of 18446744073709551615 bytes"),
            std::string::npos);
  EXPECT_NE(error_of(Bytes().op('\x8b').u32(0x7FFFFFFF).s).find("LONG4 of 2147483647 bytes"), std::string::npos);
  EXPECT_NE(error_of(Bytes().op('\x8b').u32(0xFFFFFFFF).s).find("LONG4 with a negative length"), std::string::npos);
  EXPECT_NE(error_of(Bytes().op('T').u32(0x80000000u).s).find("BINSTRING with a negative length"), std::string::npos);
  EXPECT_NE(error_of(Bytes().op('\x8a').u8(200).raw("xy").s).find("LONG1 of 200 bytes, but only 2 remain"),
            std::string::npos);
  // A FRAME longer than the file is only a hint; what follows still reads.
  const std::string framed = Bytes().op('\x95').u64(~std::uint64_t{0}).op('}').op('.').s;
  EXPECT_EQ(read(framed).events.size(), 0u);
}

TEST(PytorchSnapshot, MemoIndicesAreChecked) {
  EXPECT_NE(error_of(Bytes().op('h').u8(5).s).find("byte 2: memo index 5 was never stored"), std::string::npos);
  EXPECT_NE(error_of(Bytes().op('j').u32(0xFFFFFFFFu).s).find("memo index 4294967295 was never stored"),
            std::string::npos);
  EXPECT_NE(error_of(Bytes().op('q').u8(0).s).find("a memo PUT needs 1 values"), std::string::npos);
  // A far index costs one entry, not a table of four billion.
  const std::string far = Bytes().op('}').op('r').u32(0xFFFFFFF0u).op('0').op('j').u32(0xFFFFFFF0u).op('.').s;
  EXPECT_EQ(read(far).events.size(), 0u);
  // MEMOIZE counts what is stored, like len(memo).
  const std::string memoize = Bytes().op('N').op('\x94').op('0').op('}').op('\x94').op('0').op('h').u8(1).op('.').s;
  EXPECT_EQ(read(memoize).events.size(), 0u);
}

TEST(PytorchSnapshot, ConvertedEntriesAndTheMemo) {
  // The entry dict memoized twice; after conversion, slot 0 holds the event
  // (a second reference reads as a duplicate) and slot 1 is stale.
  auto build = [](unsigned get) {
    Bytes b;
    b.op('}').op('(').str("device_traces").op(']').op(']').op('}').op('q').u8(0).op('q').u8(1).op('(');
    b.str("action").str("alloc").str("addr").op('K').u8(16).str("size").op('K').u8(8).op('u');
    b.op('a');                  // the entry into device 0's list
    b.op('h').u8(get).op('a');  // and again, from the memo
    b.op('a').op('u').op('.');
    return b.s;
  };
  // Slot 0: the same event twice in device 0's list.
  const Trace t = read(build(0));
  ASSERT_EQ(t.events.size(), 2u);
  EXPECT_EQ(t.events[0].address, 16u);
  EXPECT_EQ(t.events[1].size, 8);
  EXPECT_NE(error_of(build(1)).find("names a dict that was already converted to a trace event and dropped"),
            std::string::npos);
}

TEST(PytorchSnapshot, EntryFieldsAreTypeChecked) {
  const std::string bad_size =
      one_entry([](Bytes& b) { b.str("action").str("alloc").str("addr").op('K').u8(1).str("size").str("big"); });
  EXPECT_NE(error_of(bad_size).find("event 0: 'size' is not a non-negative integer"), std::string::npos);
  const Trace t = read(bad_size, false);
  EXPECT_TRUE(t.events.empty());
  EXPECT_EQ(t.skipped_records, 1u);
  ASSERT_EQ(t.warnings.size(), 1u);
  EXPECT_NE(t.warnings[0].find("skipped 1 records"), std::string::npos) << t.warnings[0];

  const std::string no_size = one_entry([](Bytes& b) { b.str("action").str("alloc").str("addr").op('K').u8(1); });
  EXPECT_NE(error_of(no_size).find("t.pickle: device_traces[0][0]: has no 'size'"), std::string::npos);
  EXPECT_EQ(read(no_size, false).skipped_records, 1u);

  const std::string bad_frames = one_entry([](Bytes& b) {
    b.str("action")
        .str("free_completed")
        .str("addr")
        .op('K')
        .u8(1)
        .str("size")
        .op('K')
        .u8(1)
        .str("frames")
        .op('K')
        .u8(3);
  });
  EXPECT_NE(error_of(bad_frames).find("'frames' is not a list"), std::string::npos);

  const std::string negative = one_entry([](Bytes& b) {
    b.str("action").str("alloc").str("addr").op('J').u32(0xFFFFFFFFu).str("size").op('J').u32(0xFFFFFFF0u);
  });
  EXPECT_NE(error_of(negative).find("'size' is not a non-negative integer"), std::string::npos);

  // Keys arriving after the entry was converted still land (SETITEM on it).
  const std::string late = [] {
    Bytes b;
    b.op('}').op('(').str("device_traces").op(']').op(']').op('}').op('(').str("action").str("alloc").op('u');
    b.str("size").op('K').u8(64).op('s').str("addr").op('K').u8(32).op('s');
    b.op('a').op('a').op('u').op('.');
    return b.s;
  }();
  const Trace l = read(late);
  ASSERT_EQ(l.events.size(), 1u);
  EXPECT_EQ(l.events[0].size, 64);
  EXPECT_EQ(l.events[0].address, 32u);
}

TEST(PytorchSnapshot, DeepNestingCostsNoRecursion) {
  // MARKs nest at most kMaxMarks deep.
  Bytes marks;
  for (int i = 0; i < 5000; ++i) marks.op('(');
  EXPECT_NE(error_of(marks.s).find("more than 1000 MARKs open at once"), std::string::npos);
  // Lists nested a million deep inside an entry, freed when it converts.
  Bytes deep;
  deep.op('}').op('(').str("device_traces").op(']').op(']').op('}').op('(');
  deep.str("action").str("alloc").str("addr").op('K').u8(1).str("size").op('K').u8(2).str("junk");
  constexpr int kDepth = 1'000'000;
  for (int i = 0; i < kDepth; ++i) deep.op(']');
  for (int i = 1; i < kDepth; ++i) deep.op('a');
  deep.op('u').op('a').op('a').op('u').op('.');
  const Trace t = read(deep.s);
  ASSERT_EQ(t.events.size(), 1u);
  EXPECT_EQ(t.events[0].size, 2);
  // And a million-deep list as the whole snapshot: rejected, not recursed.
  Bytes root;
  for (int i = 0; i < kDepth; ++i) root.op(']');
  for (int i = 1; i < kDepth; ++i) root.op('a');
  root.op('.');
  EXPECT_NE(error_of(root.s).find("segments[0]: is not a dict"), std::string::npos);
}

TEST(PytorchSnapshot, StructureProblemsNameThePath) {
  const std::string not_list = Bytes().op('}').op('(').str("device_traces").op('K').u8(1).op('u').op('.').s;
  EXPECT_NE(error_of(not_list).find("t.pickle: device_traces: is not a list"), std::string::npos);
  const std::string inner = Bytes().op('}').op('(').str("device_traces").op(']').op('N').op('a').op('u').op('.').s;
  EXPECT_NE(error_of(inner).find("device_traces[0]: is not a list"), std::string::npos);
  const Trace t = read(inner, false);
  EXPECT_EQ(t.skipped_records, 1u);
  const std::string stray =
      Bytes().op('}').op('(').str("device_traces").op(']').op(']').op('K').u8(5).op('a').op('a').op('u').op('.').s;
  EXPECT_NE(error_of(stray).find("device_traces[0][0]: is a value of another type"), std::string::npos);
  const std::string seg = Bytes()
                              .op('}')
                              .op('(')
                              .str("segments")
                              .op(']')
                              .op('}')
                              .op('(')
                              .str("address")
                              .op('K')
                              .u8(0)
                              .op('u')
                              .op('a')
                              .op('u')
                              .op('.')
                              .s;
  EXPECT_NE(error_of(seg).find("segments[0]: 'total_size' is missing"), std::string::npos);
}

}  // namespace
}  // namespace gpumem::trace
