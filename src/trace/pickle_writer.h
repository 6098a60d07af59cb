#pragma once
// Writes pickles that CPython's pickle.load reads: protocol 2 (what
// torch::jit::Pickler writes) or 4 (Python 3.8+'s default, with FRAME and
// MEMOIZE). Only plain data: None, bools, ints, str, dicts, lists; strings
// are memoized by value, and a caller can memoize a container with put()
// and repeat it with get(), as PyTorch does for shared stack frames.
//
// The caller drives it opcode by opcode (empty_dict, mark, ..., setitems),
// so a ten-million-event trace streams out without building a tree.
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <unordered_map>

namespace gpumem::trace::pickle {

class Writer {
 public:
  // protocol: 2 or 4 (anything else throws std::invalid_argument).
  Writer(std::ostream& out, int protocol);

  void none();
  void boolean(bool value);
  void integer(std::int64_t value);
  void unsigned_integer(std::uint64_t value);
  void string(std::string_view text);  // memoized: each text is written once

  void empty_dict();
  void empty_list();
  void mark();
  void setitems();  // pairs above the last mark into the dict below it
  void appends();   // items above the last mark into the list below it

  // Memoizes the top of the stack; returns its memo index for get().
  std::uint32_t put();
  void get(std::uint32_t index);

  // STOP, and the last frame out. Nothing may follow.
  void stop();

 private:
  void opcode(std::uint8_t code);
  void raw(const void* data, std::size_t n);
  void uint_le(std::uint64_t value, int width);
  void end_op();  // protocol 4: closes the frame once it is large

  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };

  std::ostream& out_;
  int protocol_;
  std::string frame_;  // protocol 4: the current frame; else a write buffer
  std::uint32_t next_memo_ = 0;
  std::unordered_map<std::string, std::uint32_t, Hash, std::equal_to<>> strings_;
};

}  // namespace gpumem::trace::pickle
