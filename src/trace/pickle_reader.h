#pragma once
// A pickle machine of our own, for PyTorch memory snapshots. It runs the
// data opcodes of protocols 2 to 5 (containers, numbers, strings, the memo,
// frames) and nothing that loads code: GLOBAL, STACK_GLOBAL, REDUCE, BUILD,
// INST, OBJ, NEWOBJ(_EX), EXT1/2/4, PERSID, BINPERSID and out-of-band
// buffers are rejected with the opcode's byte offset. Opcode meanings follow
// CPython's Lib/pickletools.py and Lib/pickle.py (Unpickler.load_*).
//
// Nothing is trusted: every length is checked against the bytes left, memo
// indices are checked, LONG4 numbers are capped, MARKs nest at most
// kMaxMarks deep, and no code path recurses on the input's nesting.
//
// Memory: strings are views into the input, interned (one id per distinct
// text). Containers live in a recycled arena. A Hooks object (the snapshot
// reader) may turn a dict into an opaque id the moment it is filled — a trace
// entry becomes a trace::Event — and the machine then frees the dict; lists
// that hold only consecutive opaque ids store them as a range, so a list of
// ten million converted entries costs a few bytes.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gpumem/common/error.h"

namespace gpumem::trace::pickle {

inline constexpr std::size_t kMaxMarks = 1000;      // open MARKs at once
inline constexpr std::size_t kMaxLongBytes = 4096;  // LONG4 payload

enum class Kind : std::uint8_t {
  kNone,
  kBool,
  kInt,     // fits int64 (bits holds it)
  kUInt,    // above INT64_MAX, fits uint64
  kBigInt,  // anything larger: read, but no field of a snapshot takes it
  kFloat,   // bits holds the double's bits
  kStr,     // bits: string id (Machine::text)
  kBytes,   // bits: string id
  kList,    // bits: container slot, generation: its life
  kTuple,
  kDict,
  kSet,
  kOpaque,  // bits: an id the hooks gave a converted dict
  kUnset,   // a memo slot never written; never on the stack
};

struct Value {
  Kind kind = Kind::kNone;
  std::uint32_t generation = 0;
  std::uint64_t bits = 0;

  bool is_container() const {
    return kind == Kind::kList || kind == Kind::kTuple || kind == Kind::kDict || kind == Kind::kSet;
  }
};

struct Container {
  Kind kind = Kind::kList;
  bool shared = false;         // memoized or DUP'ed: may be referenced twice
  bool derived_valid = false;  // `derived` is valid: no item changed since
  std::uint32_t generation = 0;
  std::uint32_t derived = 0;          // for the hooks: what they computed from the items (a stack's context)
  std::uint64_t memo_slot = kNoSlot;  // the first memo index that holds it
  // A list's items begin with the opaque ids [run_first, run_first +
  // run_count), then `items`; dicts hold key, value, key, value...
  std::uint64_t run_first = 0;
  std::uint64_t run_count = 0;
  std::vector<Value> items;

  static constexpr std::uint64_t kNoSlot = ~std::uint64_t{0};
  std::size_t size() const { return static_cast<std::size_t>(run_count) + items.size(); }
  Value at(std::size_t i) const {
    if (i < run_count) return Value{Kind::kOpaque, 0, run_first + i};
    return items[i - static_cast<std::size_t>(run_count)];
  }
};

// Thrown for every problem in the pickle itself. needs_code: the pickle asks
// for code to run; never worked around.
class PickleError : public InputError {
 public:
  PickleError(const std::string& message, std::size_t offset_, std::string problem_, bool needs_code_)
      : InputError(message), offset(offset_), problem(std::move(problem_)), needs_code(needs_code_) {}
  std::size_t offset;
  std::string problem;
  bool needs_code;
};

class Machine;

// What the snapshot reader plugs in.
class Hooks {
 public:
  virtual ~Hooks() = default;
  // The dict in `slot` gained pairs from pair index `first_new` on (SETITEM,
  // SETITEMS, DICT). Return an opaque value to stand for it from now on: the
  // machine frees the dict and whatever only it held.
  virtual std::optional<Value> dict_filled(Machine& m, const Container& dict, std::size_t first_new) = 0;
  // SETITEM(S) on an opaque value (a key arriving after the conversion).
  virtual void set_opaque(Machine& m, Value target, Value key, Value value) = 0;
};

class Machine {
 public:
  Machine(std::string_view data, std::string name, Hooks& hooks);

  // Runs to STOP and returns the pickled object. Throws PickleError.
  Value run();
  // After run() threw: the object as if every container still open were
  // closed where the input stopped (the items after each MARK go to the
  // container below it). None when nothing was built.
  Value salvage();

  // Byte offset of the opcode running now (or of the end, once finished).
  std::size_t offset() const { return op_start_; }
  const std::string& name() const { return name_; }
  [[noreturn]] void fail(std::size_t at, const std::string& problem, bool needs_code = false) const;

  // Interning: the id of a text, added if new. The view must outlive the
  // machine (a literal, or part of the input).
  std::uint32_t intern(std::string_view text);
  std::string_view text(Value v) const { return strings_[static_cast<std::size_t>(v.bits)]; }
  // The container a value names; nullptr for a non-container or for one the
  // machine already freed (a stale reference).
  const Container* container(Value v) const;
  Container* container(Value v);
  // The last value stored under a string key in a dict; nullopt if absent.
  std::optional<Value> get(const Container& dict, std::uint32_t key_id) const;

 private:
  std::uint8_t byte();
  std::string_view bytes(std::uint64_t n, const char* what);
  std::uint64_t uint_le(int width, const char* what);
  std::string_view line(const char* what);
  void need_stack(std::size_t n, const char* op) const;
  std::size_t frame_base() const { return marks_.empty() ? 0 : marks_.back(); }
  std::size_t pop_mark(const char* op);
  Value pop() {
    Value v = stack_.back();
    stack_.pop_back();
    return v;
  }
  void push(Value v) { stack_.push_back(v); }

  Value new_container(Kind kind);
  void free_container(std::uint32_t slot);
  void release_children(std::vector<Value>& work);
  Value string_value(Kind kind, std::string_view text);
  Value long_value(std::string_view le_bytes);
  void push_int_text(std::string_view digits);
  void memo_put(std::uint64_t index);
  Value memo_get(std::uint64_t index);
  void append_to(Value target, std::size_t from, const char* op);
  void set_items(std::size_t target_index, std::size_t from, const char* op);
  void add_to_set(Value target, std::size_t from, const char* op);
  void reject_code(std::uint8_t op);
  void step(std::uint8_t op);

  std::string_view data_;
  std::string name_;
  Hooks& hooks_;
  std::size_t pos_ = 0;
  std::size_t op_start_ = 0;
  bool stopped_ = false;
  Value result_;
  std::vector<Value> scratch_;  // release_children's worklist, reused

  std::vector<Value> stack_;
  std::vector<std::size_t> marks_;  // stack sizes at each open MARK

  std::vector<Value> memo_;  // dense part; kUnset where never written
  std::unordered_map<std::uint64_t, Value> sparse_memo_;
  std::uint64_t memo_count_ = 0;  // written slots, for MEMOIZE (len(memo))

  std::vector<Container> containers_;
  std::vector<std::uint32_t> free_slots_;

  std::vector<std::string_view> strings_;
  std::unordered_map<std::string_view, std::uint32_t> string_ids_;
};

}  // namespace gpumem::trace::pickle
