// The pickle machine: one switch over the opcodes, a value stack with MARK
// positions, the memo, and a recycled arena of containers. Semantics follow
// CPython's Lib/pickle.py (Unpickler.load_*), minus everything that calls
// code.
#include "trace/pickle_reader.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <limits>

#include <fmt/format.h>

namespace gpumem::trace::pickle {
namespace {

// Opcodes, with the names CPython's Lib/pickle.py gives them.
namespace op {
constexpr std::uint8_t kMark = '(', kStop = '.', kPop = '0', kPopMark = '1', kDup = '2', kFloat = 'F', kInt = 'I',
                       kBinInt = 'J', kBinInt1 = 'K', kLong = 'L', kBinInt2 = 'M', kNone = 'N', kPersId = 'P',
                       kBinPersId = 'Q', kReduce = 'R', kString = 'S', kBinString = 'T', kShortBinString = 'U',
                       kUnicode = 'V', kBinUnicode = 'X', kAppend = 'a', kBuild = 'b', kGlobal = 'c', kDict = 'd',
                       kEmptyDict = '}', kAppends = 'e', kGet = 'g', kBinGet = 'h', kInst = 'i', kLongBinGet = 'j',
                       kList = 'l', kEmptyList = ']', kObj = 'o', kPut = 'p', kBinPut = 'q', kLongBinPut = 'r',
                       kSetItem = 's', kTuple = 't', kEmptyTuple = ')', kSetItems = 'u', kBinFloat = 'G',
                       kBinBytes = 'B', kShortBinBytes = 'C';
constexpr std::uint8_t kProto = 0x80, kNewObj = 0x81, kExt1 = 0x82, kExt2 = 0x83, kExt4 = 0x84, kTuple1 = 0x85,
                       kTuple2 = 0x86, kTuple3 = 0x87, kNewTrue = 0x88, kNewFalse = 0x89, kLong1 = 0x8a, kLong4 = 0x8b,
                       kShortBinUnicode = 0x8c, kBinUnicode8 = 0x8d, kBinBytes8 = 0x8e, kEmptySet = 0x8f,
                       kAddItems = 0x90, kFrozenSet = 0x91, kNewObjEx = 0x92, kStackGlobal = 0x93, kMemoize = 0x94,
                       kFrame = 0x95, kByteArray8 = 0x96, kNextBuffer = 0x97, kReadonlyBuffer = 0x98;
}  // namespace op

const char* op_name(std::uint8_t code) {
  switch (code) {
    case op::kGlobal: return "GLOBAL";
    case op::kStackGlobal: return "STACK_GLOBAL";
    case op::kReduce: return "REDUCE";
    case op::kBuild: return "BUILD";
    case op::kInst: return "INST";
    case op::kObj: return "OBJ";
    case op::kNewObj: return "NEWOBJ";
    case op::kNewObjEx: return "NEWOBJ_EX";
    case op::kExt1: return "EXT1";
    case op::kExt2: return "EXT2";
    case op::kExt4: return "EXT4";
    case op::kPersId: return "PERSID";
    case op::kBinPersId: return "BINPERSID";
    case op::kNextBuffer: return "NEXT_BUFFER";
    case op::kReadonlyBuffer: return "READONLY_BUFFER";
    case op::kString: return "STRING";
    case op::kUnicode: return "UNICODE";
    case op::kFloat: return "FLOAT";
    default: return "?";
  }
}

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kNone: return "None";
    case Kind::kBool: return "bool";
    case Kind::kInt:
    case Kind::kUInt:
    case Kind::kBigInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kStr: return "str";
    case Kind::kBytes: return "bytes";
    case Kind::kList: return "list";
    case Kind::kTuple: return "tuple";
    case Kind::kDict: return "dict";
    case Kind::kSet: return "set";
    case Kind::kOpaque: return "trace entry";
    case Kind::kUnset: break;
  }
  return "nothing";
}

// Memo indices this far past the dense part go to a hash map instead, so a
// LONG_BINPUT of 4e9 costs one entry, not 64 GB.
constexpr std::uint64_t kDenseMemoSlack = 4096;
// A recycled container keeps its vector unless it grew past this.
constexpr std::size_t kKeptCapacity = 64;

}  // namespace

Machine::Machine(std::string_view data, std::string name, Hooks& hooks)
    : data_(data), name_(std::move(name)), hooks_(hooks) {
  // Snapshots memoize about one value per trace entry; reserving (address
  // space, not memory, until touched) spares the copies of growth.
  memo_.reserve(std::min<std::size_t>(data.size() / 32, std::size_t{1} << 24));
}

void Machine::fail(std::size_t at, const std::string& problem, bool needs_code) const {
  throw PickleError(fmt::format("{}: byte {}: {}", printable(name_), at, problem), at, problem, needs_code);
}

std::uint32_t Machine::intern(std::string_view text) {
  auto [it, inserted] = string_ids_.try_emplace(text, static_cast<std::uint32_t>(strings_.size()));
  if (inserted) strings_.push_back(text);
  return it->second;
}

const Container* Machine::container(Value v) const {
  if (!v.is_container() || v.bits >= containers_.size()) return nullptr;
  const Container& c = containers_[static_cast<std::size_t>(v.bits)];
  return c.generation == v.generation && c.kind == v.kind ? &c : nullptr;
}

Container* Machine::container(Value v) {
  return const_cast<Container*>(static_cast<const Machine*>(this)->container(v));
}

std::optional<Value> Machine::get(const Container& dict, std::uint32_t key_id) const {
  // Later pairs win, as in a Python dict built by SETITEM(S).
  for (std::size_t i = dict.items.size(); i >= 2; i -= 2) {
    const Value& k = dict.items[i - 2];
    if (k.kind == Kind::kStr && k.bits == key_id) return dict.items[i - 1];
  }
  return std::nullopt;
}

// ---- reading the input ----

std::uint8_t Machine::byte() {
  if (pos_ >= data_.size()) fail(op_start_, "the file ends inside an opcode's argument");
  return static_cast<std::uint8_t>(data_[pos_++]);
}

std::string_view Machine::bytes(std::uint64_t n, const char* what) {
  const std::size_t left = data_.size() - pos_;
  if (n > left) fail(op_start_, fmt::format("{} of {} bytes, but only {} remain in the file", what, n, left));
  std::string_view out = data_.substr(pos_, static_cast<std::size_t>(n));
  pos_ += static_cast<std::size_t>(n);
  return out;
}

std::uint64_t Machine::uint_le(int width, const char* what) {
  if (data_.size() - pos_ < static_cast<std::size_t>(width))
    fail(op_start_, fmt::format("the file ends inside {}'s argument", what));
  std::uint64_t v = 0;
  for (int i = width - 1; i >= 0; --i)
    v = (v << 8) | static_cast<std::uint8_t>(data_[pos_ + static_cast<std::size_t>(i)]);
  pos_ += static_cast<std::size_t>(width);
  return v;
}

// A newline-terminated argument of the text opcodes (INT, GET, PUT, GLOBAL).
std::string_view Machine::line(const char* what) {
  constexpr std::size_t kMaxLine = 256;
  std::string_view rest = data_.substr(pos_, kMaxLine);
  std::size_t nl = rest.find('\n');
  if (nl == std::string_view::npos) {
    if (rest.size() < kMaxLine) fail(op_start_, fmt::format("the file ends inside {}'s argument", what));
    fail(op_start_, fmt::format("{}'s argument has no newline in {} bytes", what, kMaxLine));
  }
  pos_ += nl + 1;
  return rest.substr(0, nl);
}

void Machine::need_stack(std::size_t n, const char* op) const {
  const std::size_t have = stack_.size() - frame_base();
  if (have < n)
    fail(op_start_, fmt::format("{} needs {} values on the stack above the last MARK, but there are {}", op, n, have));
}

std::size_t Machine::pop_mark(const char* op) {
  if (marks_.empty()) fail(op_start_, fmt::format("{} without a MARK before it", op));
  std::size_t m = marks_.back();
  marks_.pop_back();
  return m;
}

// ---- containers ----

Value Machine::new_container(Kind kind) {
  std::uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    if (containers_.size() >= std::numeric_limits<std::uint32_t>::max())
      fail(op_start_, "more than 4 billion containers");
    slot = static_cast<std::uint32_t>(containers_.size());
    containers_.emplace_back();
  }
  Container& c = containers_[slot];
  c.kind = kind;
  return Value{kind, c.generation, slot};
}

void Machine::free_container(std::uint32_t slot) {
  Container& c = containers_[slot];
  ++c.generation;  // every Value naming the old life is stale from now on
  c.shared = false;
  c.derived_valid = false;
  c.derived = 0;
  c.memo_slot = Container::kNoSlot;
  c.run_first = c.run_count = 0;
  c.items.clear();
  if (c.items.capacity() > kKeptCapacity) std::vector<Value>().swap(c.items);
  free_slots_.push_back(slot);
}

// Frees the containers `items` alone held (never memoized nor DUP'ed), with
// a worklist: nesting depth costs no stack.
void Machine::release_children(std::vector<Value>& work) {
  while (!work.empty()) {
    Value v = work.back();
    work.pop_back();
    Container* c = container(v);
    if (c == nullptr || c->shared) continue;
    for (const Value& item : c->items)
      if (item.is_container()) work.push_back(item);
    free_container(static_cast<std::uint32_t>(v.bits));
  }
}

Value Machine::string_value(Kind kind, std::string_view text) { return Value{kind, 0, intern(text)}; }

// Little-endian two's complement, as LONG1/LONG4 carry it (pickletools'
// decode_long).
Value Machine::long_value(std::string_view le) {
  std::size_t n = le.size();
  auto at = [&](std::size_t i) { return static_cast<std::uint8_t>(le[i]); };
  // Drop sign-extension bytes the number does not need.
  while (n > 1 && ((at(n - 1) == 0x00 && at(n - 2) < 0x80) || (at(n - 1) == 0xff && at(n - 2) >= 0x80))) --n;
  if (n == 0) return Value{Kind::kInt, 0, 0};
  if (n <= 8) {
    std::uint64_t v = 0;
    for (std::size_t i = n; i-- > 0;) v = (v << 8) | at(i);
    if (n < 8 && (at(n - 1) & 0x80)) v |= ~std::uint64_t{0} << (8 * n);  // sign-extend
    return Value{Kind::kInt, 0, v};
  }
  if (n == 9 && at(8) == 0x00) {  // 2^63 .. 2^64-1
    std::uint64_t v = 0;
    for (std::size_t i = 8; i-- > 0;) v = (v << 8) | at(i);
    return Value{Kind::kUInt, 0, v};
  }
  return Value{Kind::kBigInt, 0, 0};
}

// INT and LONG of protocol 0: decimal text; INT's "00"/"01" are booleans.
void Machine::push_int_text(std::string_view digits) {
  if (digits == "00" || digits == "01") return push(Value{Kind::kBool, 0, digits == "01" ? 1u : 0u});
  if (!digits.empty() && digits.back() == 'L') digits.remove_suffix(1);
  std::string_view body = digits;
  if (!body.empty() && (body.front() == '-' || body.front() == '+')) body.remove_prefix(1);
  if (body.empty() || body.find_first_not_of("0123456789") != std::string_view::npos)
    fail(op_start_, fmt::format("malformed decimal number '{}'", printable(digits)));
  if (digits.front() == '+') digits.remove_prefix(1);
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec == std::errc() && end == digits.data() + digits.size())
    return push(Value{Kind::kInt, 0, static_cast<std::uint64_t>(v)});
  std::uint64_t u = 0;
  auto [end2, ec2] = std::from_chars(digits.data(), digits.data() + digits.size(), u);
  if (ec2 == std::errc() && end2 == digits.data() + digits.size()) return push(Value{Kind::kUInt, 0, u});
  push(Value{Kind::kBigInt, 0, 0});
}

// ---- the memo ----

void Machine::memo_put(std::uint64_t index) {
  need_stack(1, "a memo PUT");
  const Value v = stack_.back();
  if (Container* c = container(v)) {
    c->shared = true;
    if (c->memo_slot == Container::kNoSlot) c->memo_slot = index;
  }
  if (index == memo_.size()) {  // the usual case: MEMOIZE, or BINPUT counting up
    memo_.push_back(v);
    ++memo_count_;
    return;
  }
  if (index < memo_.size() + kDenseMemoSlack) {
    if (index >= memo_.size()) memo_.resize(static_cast<std::size_t>(index) + 1, Value{Kind::kUnset, 0, 0});
    Value& slot = memo_[static_cast<std::size_t>(index)];
    if (slot.kind == Kind::kUnset) ++memo_count_;
    slot = v;
    return;
  }
  auto [it, inserted] = sparse_memo_.insert_or_assign(index, v);
  (void)it;
  if (inserted) ++memo_count_;
}

Value Machine::memo_get(std::uint64_t index) {
  Value v{Kind::kUnset, 0, 0};
  if (index < memo_.size()) {
    v = memo_[static_cast<std::size_t>(index)];
  } else if (auto it = sparse_memo_.find(index); it != sparse_memo_.end()) {
    v = it->second;
  }
  if (v.kind == Kind::kUnset) fail(op_start_, fmt::format("memo index {} was never stored", index));
  if (v.is_container() && container(v) == nullptr)
    fail(op_start_, fmt::format("memo index {} names a dict that was already converted to a trace event and dropped; "
                                "a snapshot does not refer to a trace entry twice",
                                index));
  return v;
}

// ---- filling containers ----

void Machine::append_to(Value target, std::size_t from, const char* op) {
  Container* c = container(target);
  if (c == nullptr || c->kind != Kind::kList) {
    fail(op_start_,
         fmt::format("{} to a {}, not a list", op,
                     target.is_container() && c == nullptr ? "converted trace entry" : kind_name(target.kind)));
  }
  c->derived_valid = false;
  for (std::size_t i = from; i < stack_.size(); ++i) {
    const Value& v = stack_[i];
    // Consecutive converted entries collapse into a range.
    if (v.kind == Kind::kOpaque && c->items.empty() && (c->run_count == 0 || v.bits == c->run_first + c->run_count)) {
      if (c->run_count == 0) c->run_first = v.bits;
      ++c->run_count;
    } else {
      c->items.push_back(v);
    }
  }
  stack_.resize(from);
}

void Machine::add_to_set(Value target, std::size_t from, const char* op) {
  Container* c = container(target);
  if (c == nullptr || c->kind != Kind::kSet)
    fail(op_start_, fmt::format("{} to a {}, not a set", op, kind_name(target.kind)));
  c->items.insert(c->items.end(), stack_.begin() + static_cast<std::ptrdiff_t>(from), stack_.end());
  stack_.resize(from);
}

// The pairs stack_[from..] go into the dict (or converted entry) at
// stack_[target_index]; then the hooks may convert the dict.
void Machine::set_items(std::size_t target_index, std::size_t from, const char* op) {
  const Value target = stack_[target_index];
  if ((stack_.size() - from) % 2 != 0)
    fail(op_start_, fmt::format("{} with an odd number of items (a key without a value)", op));
  if (target.kind == Kind::kOpaque) {
    for (std::size_t i = from; i < stack_.size(); i += 2) hooks_.set_opaque(*this, target, stack_[i], stack_[i + 1]);
    stack_.resize(from);
    return;
  }
  Container* c = container(target);
  if (c == nullptr || c->kind != Kind::kDict) {
    fail(op_start_,
         fmt::format("{} on a {}, not a dict", op,
                     target.is_container() && c == nullptr ? "converted trace entry" : kind_name(target.kind)));
  }
  const std::size_t first_new = c->items.size() / 2;
  c->items.insert(c->items.end(), stack_.begin() + static_cast<std::ptrdiff_t>(from), stack_.end());
  c->derived_valid = false;
  stack_.resize(from);
  std::optional<Value> replacement = hooks_.dict_filled(*this, *c, first_new);
  if (!replacement) return;
  // The dict is now an event: every place that held it gets the opaque id.
  const auto slot = static_cast<std::uint32_t>(target.bits);
  if (c->memo_slot != Container::kNoSlot) {
    Value* m = nullptr;
    if (c->memo_slot < memo_.size()) {
      m = &memo_[static_cast<std::size_t>(c->memo_slot)];
    } else if (auto it = sparse_memo_.find(c->memo_slot); it != sparse_memo_.end()) {
      m = &it->second;
    }
    if (m && m->kind == target.kind && m->bits == target.bits && m->generation == target.generation) *m = *replacement;
  }
  stack_[target_index] = *replacement;
  scratch_.clear();
  for (const Value& item : c->items)
    if (item.is_container()) scratch_.push_back(item);
  free_container(slot);
  release_children(scratch_);
}

void Machine::reject_code(std::uint8_t code) {
  std::string what = op_name(code);
  if (code == op::kGlobal) {
    // Name the global when its two lines are there; it is never looked up.
    std::string_view rest = data_.substr(pos_, 512);
    std::size_t a = rest.find('\n');
    std::size_t b = a == std::string_view::npos ? a : rest.find('\n', a + 1);
    if (b != std::string_view::npos)
      what += fmt::format(" '{}.{}'", printable(rest.substr(0, a)), printable(rest.substr(a + 1, b - a - 1)));
  } else if (code == op::kStackGlobal && stack_.size() >= 2 && stack_[stack_.size() - 2].kind == Kind::kStr &&
             stack_.back().kind == Kind::kStr) {
    what += fmt::format(" '{}.{}'", printable(text(stack_[stack_.size() - 2])), printable(text(stack_.back())));
  }
  fail(op_start_, what + ": a pickle that needs code to load is not a snapshot", true);
}

// ---- the machine ----

Value Machine::run() {
  if (data_.empty() || static_cast<std::uint8_t>(data_[0]) != op::kProto)
    fail(0, "not a pickle of protocol 2 or later (PyTorch snapshots start with the PROTO opcode, byte 0x80)");
  while (!stopped_) {
    op_start_ = pos_;
    if (pos_ >= data_.size())
      fail(pos_, stack_.empty() ? "the file ends before the pickle's STOP opcode" : "the file ends inside an object");
    step(static_cast<std::uint8_t>(data_[pos_++]));
  }
  op_start_ = pos_;
  return result_;
}

void Machine::step(std::uint8_t code) {
  switch (code) {
    case op::kProto: {
      const std::uint8_t v = byte();
      if (v > 5) fail(op_start_, fmt::format("pickle protocol {}; gpumem reads protocols 2 to 5", v));
      return;
    }
    case op::kFrame:
      // A hint for buffered readers; the whole file is already here.
      uint_le(8, "FRAME");
      return;
    case op::kStop:
      need_stack(1, "STOP");
      result_ = pop();
      stopped_ = true;
      return;

    // Stack shuffling.
    case op::kMark:
      if (marks_.size() >= kMaxMarks)
        fail(op_start_, fmt::format("more than {} MARKs open at once; a snapshot nests a few deep", kMaxMarks));
      marks_.push_back(stack_.size());
      return;
    case op::kPop:
      // pickle.py's load_pop: with nothing above the MARK, pops the MARK.
      if (stack_.size() > frame_base()) {
        stack_.pop_back();
      } else {
        stack_.resize(pop_mark("POP"));
      }
      return;
    case op::kPopMark: stack_.resize(pop_mark("POP_MARK")); return;
    case op::kDup: {
      need_stack(1, "DUP");
      const Value v = stack_.back();
      if (Container* c = container(v)) c->shared = true;
      push(v);
      return;
    }

    // Scalars.
    case op::kNone: return push(Value{});
    case op::kNewTrue: return push(Value{Kind::kBool, 0, 1});
    case op::kNewFalse: return push(Value{Kind::kBool, 0, 0});
    case op::kBinInt: {
      const auto v = static_cast<std::int32_t>(static_cast<std::uint32_t>(uint_le(4, "BININT")));
      return push(Value{Kind::kInt, 0, static_cast<std::uint64_t>(static_cast<std::int64_t>(v))});
    }
    case op::kBinInt1: return push(Value{Kind::kInt, 0, uint_le(1, "BININT1")});
    case op::kBinInt2: return push(Value{Kind::kInt, 0, uint_le(2, "BININT2")});
    case op::kLong1: {
      const std::uint64_t n = uint_le(1, "LONG1");
      return push(long_value(bytes(n, "LONG1")));
    }
    case op::kLong4: {
      const auto n = static_cast<std::int32_t>(static_cast<std::uint32_t>(uint_le(4, "LONG4")));
      if (n < 0) fail(op_start_, fmt::format("LONG4 with a negative length ({})", n));
      if (static_cast<std::size_t>(n) > kMaxLongBytes)
        fail(op_start_, fmt::format("LONG4 of {} bytes; no number in a snapshot needs more than {}", n, kMaxLongBytes));
      return push(long_value(bytes(static_cast<std::uint64_t>(n), "LONG4")));
    }
    case op::kInt: return push_int_text(line("INT"));
    case op::kLong: return push_int_text(line("LONG"));
    case op::kBinFloat: {
      // Big-endian IEEE 754, unlike every other number in a pickle.
      std::string_view b = bytes(8, "BINFLOAT");
      std::uint64_t bits = 0;
      for (char c : b) bits = (bits << 8) | static_cast<std::uint8_t>(c);
      return push(Value{Kind::kFloat, 0, bits});
    }

    // Strings and bytes: views into the input, interned.
    case op::kShortBinUnicode:
      return push(string_value(Kind::kStr, bytes(uint_le(1, "SHORT_BINUNICODE"), "SHORT_BINUNICODE")));
    case op::kBinUnicode: return push(string_value(Kind::kStr, bytes(uint_le(4, "BINUNICODE"), "BINUNICODE")));
    case op::kBinUnicode8: return push(string_value(Kind::kStr, bytes(uint_le(8, "BINUNICODE8"), "BINUNICODE8")));
    case op::kShortBinString:
      return push(string_value(Kind::kStr, bytes(uint_le(1, "SHORT_BINSTRING"), "SHORT_BINSTRING")));
    case op::kBinString: {
      const auto n = static_cast<std::int32_t>(static_cast<std::uint32_t>(uint_le(4, "BINSTRING")));
      if (n < 0) fail(op_start_, fmt::format("BINSTRING with a negative length ({})", n));
      return push(string_value(Kind::kStr, bytes(static_cast<std::uint64_t>(n), "BINSTRING")));
    }
    case op::kShortBinBytes:
      return push(string_value(Kind::kBytes, bytes(uint_le(1, "SHORT_BINBYTES"), "SHORT_BINBYTES")));
    case op::kBinBytes: return push(string_value(Kind::kBytes, bytes(uint_le(4, "BINBYTES"), "BINBYTES")));
    case op::kBinBytes8: return push(string_value(Kind::kBytes, bytes(uint_le(8, "BINBYTES8"), "BINBYTES8")));
    case op::kByteArray8: return push(string_value(Kind::kBytes, bytes(uint_le(8, "BYTEARRAY8"), "BYTEARRAY8")));

    // Containers.
    case op::kEmptyDict: return push(new_container(Kind::kDict));
    case op::kEmptyList: return push(new_container(Kind::kList));
    case op::kEmptyTuple: return push(new_container(Kind::kTuple));
    case op::kEmptySet: return push(new_container(Kind::kSet));
    case op::kTuple1:
    case op::kTuple2:
    case op::kTuple3: {
      const std::size_t n = code - op::kTuple1 + 1u;
      need_stack(n, "TUPLE1/2/3");
      const std::size_t from = stack_.size() - n;
      Value t = new_container(Kind::kTuple);
      containers_[static_cast<std::size_t>(t.bits)].items.assign(stack_.begin() + static_cast<std::ptrdiff_t>(from),
                                                                 stack_.end());
      stack_.resize(from);
      return push(t);
    }
    case op::kTuple:
    case op::kList:
    case op::kFrozenSet:
    case op::kDict: {
      const char* name = code == op::kTuple  ? "TUPLE"
                         : code == op::kList ? "LIST"
                         : code == op::kDict ? "DICT"
                                             : "FROZENSET";
      const std::size_t from = pop_mark(name);
      const Kind kind = code == op::kTuple  ? Kind::kTuple
                        : code == op::kList ? Kind::kList
                        : code == op::kDict ? Kind::kDict
                                            : Kind::kSet;
      Value v = new_container(kind);
      if (kind == Kind::kList) {
        // Through append_to, so converted entries still collapse.
        stack_.insert(stack_.begin() + static_cast<std::ptrdiff_t>(from), v);
        append_to(v, from + 1, name);
        return;
      }
      if (kind == Kind::kDict) {
        stack_.insert(stack_.begin() + static_cast<std::ptrdiff_t>(from), v);
        set_items(from, from + 1, name);
        return;
      }
      containers_[static_cast<std::size_t>(v.bits)].items.assign(stack_.begin() + static_cast<std::ptrdiff_t>(from),
                                                                 stack_.end());
      stack_.resize(from);
      return push(v);
    }
    case op::kAppend: need_stack(2, "APPEND"); return append_to(stack_[stack_.size() - 2], stack_.size() - 1, "APPEND");
    case op::kAppends: {
      const std::size_t from = pop_mark("APPENDS");
      if (from == 0 || from - 1 < frame_base()) fail(op_start_, "APPENDS with no list below its MARK");
      return append_to(stack_[from - 1], from, "APPENDS");
    }
    case op::kSetItem: need_stack(3, "SETITEM"); return set_items(stack_.size() - 3, stack_.size() - 2, "SETITEM");
    case op::kSetItems: {
      const std::size_t from = pop_mark("SETITEMS");
      if (from == 0 || from - 1 < frame_base()) fail(op_start_, "SETITEMS with no dict below its MARK");
      return set_items(from - 1, from, "SETITEMS");
    }
    case op::kAddItems: {
      const std::size_t from = pop_mark("ADDITEMS");
      if (from == 0 || from - 1 < frame_base()) fail(op_start_, "ADDITEMS with no set below its MARK");
      return add_to_set(stack_[from - 1], from, "ADDITEMS");
    }

    // The memo.
    case op::kBinPut: return memo_put(uint_le(1, "BINPUT"));
    case op::kLongBinPut: return memo_put(uint_le(4, "LONG_BINPUT"));
    case op::kMemoize: return memo_put(memo_count_);
    case op::kBinGet: return push(memo_get(uint_le(1, "BINGET")));
    case op::kLongBinGet: return push(memo_get(uint_le(4, "LONG_BINGET")));
    case op::kPut:
    case op::kGet: {
      std::string_view digits = line(code == op::kPut ? "PUT" : "GET");
      std::uint64_t index = 0;
      auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
      if (ec != std::errc() || end != digits.data() + digits.size())
        fail(op_start_, fmt::format("malformed memo index '{}'", printable(digits)));
      if (code == op::kPut) return memo_put(index);
      return push(memo_get(index));
    }

    // What loads code, or data no snapshot has.
    case op::kGlobal:
    case op::kStackGlobal:
    case op::kReduce:
    case op::kBuild:
    case op::kInst:
    case op::kObj:
    case op::kNewObj:
    case op::kNewObjEx:
    case op::kExt1:
    case op::kExt2:
    case op::kExt4:
    case op::kPersId:
    case op::kBinPersId:
    case op::kNextBuffer:
    case op::kReadonlyBuffer: return reject_code(code);
    case op::kString:
    case op::kUnicode:
    case op::kFloat:
      fail(op_start_, fmt::format("{} (a protocol 0 text opcode) is not in snapshots, and gpumem does not read it",
                                  op_name(code)));
    default: fail(op_start_, fmt::format("unknown opcode 0x{:02x}", code));
  }
}

Value Machine::salvage() {
  if (stopped_) return result_;
  // Close each open MARK, innermost first: its items go to the container
  // below it, as the APPENDS/SETITEMS the input stopped before would have.
  while (!marks_.empty()) {
    const std::size_t m = marks_.back();
    marks_.pop_back();
    if (m > frame_base() && m <= stack_.size()) {
      const Value target = stack_[m - 1];
      try {
        if (target.kind == Kind::kList && container(target)) {
          append_to(target, m, "APPENDS");
        } else if ((target.kind == Kind::kDict && container(target)) || target.kind == Kind::kOpaque) {
          if ((stack_.size() - m) % 2 != 0) stack_.pop_back();  // a key without its value
          set_items(m - 1, m, "SETITEMS");
        } else if (target.kind == Kind::kSet && container(target)) {
          add_to_set(target, m, "ADDITEMS");
        }
      } catch (const PickleError&) {
        // Salvage keeps what it can; a frame that does not fit is dropped.
      }
    }
    if (stack_.size() > m) stack_.resize(m);
  }
  // Then the single APPEND or SETITEM the input may have stopped before.
  while (stack_.size() > 1) {
    const std::size_t n = stack_.size();
    try {
      if (n >= 3 && !stack_[n - 2].is_container() &&
          ((stack_[n - 3].kind == Kind::kDict && container(stack_[n - 3])) || stack_[n - 3].kind == Kind::kOpaque)) {
        set_items(n - 3, n - 2, "SETITEM");
        continue;
      }
      if (stack_[n - 2].kind == Kind::kList && container(stack_[n - 2])) {
        append_to(stack_[n - 2], n - 1, "APPEND");
        continue;
      }
    } catch (const PickleError&) {
    }
    if (stack_.size() == n) stack_.pop_back();
  }
  return stack_.empty() ? Value{} : stack_.front();
}

}  // namespace gpumem::trace::pickle
