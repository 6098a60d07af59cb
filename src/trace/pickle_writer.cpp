// The pickle writer: opcodes and their arguments as CPython's Lib/pickle.py
// (Pickler.save_*) lays them out, into frames of about 64 KiB for protocol 4.
#include "trace/pickle_writer.h"

#include <limits>
#include <ostream>
#include <stdexcept>

namespace gpumem::trace::pickle {
namespace {

constexpr std::uint8_t kProto = 0x80, kFrame = 0x95, kMemoize = 0x94, kShortBinUnicode = 0x8c, kBinUnicode8 = 0x8d,
                       kLong1 = 0x8a, kNewTrue = 0x88, kNewFalse = 0x89;
constexpr std::uint8_t kNone = 'N', kBinInt = 'J', kBinInt1 = 'K', kBinInt2 = 'M', kBinUnicode = 'X', kEmptyDict = '}',
                       kEmptyList = ']', kMark = '(', kSetItems = 'u', kAppends = 'e', kBinPut = 'q', kLongBinPut = 'r',
                       kBinGet = 'h', kLongBinGet = 'j', kStop = '.';
// pickle.py's _Framer._FRAME_SIZE_TARGET.
constexpr std::size_t kFrameTarget = 64 * 1024;

}  // namespace

Writer::Writer(std::ostream& out, int protocol) : out_(out), protocol_(protocol) {
  if (protocol != 2 && protocol != 4) throw std::invalid_argument("pickle protocol must be 2 or 4");
  // PROTO comes before the first frame, as pickle.py writes it.
  const char head[2] = {static_cast<char>(kProto), static_cast<char>(protocol)};
  out_.write(head, 2);
}

void Writer::opcode(std::uint8_t code) { frame_.push_back(static_cast<char>(code)); }

void Writer::raw(const void* data, std::size_t n) { frame_.append(static_cast<const char*>(data), n); }

void Writer::uint_le(std::uint64_t value, int width) {
  for (int i = 0; i < width; ++i) frame_.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

void Writer::end_op() {
  if (frame_.size() < kFrameTarget) return;
  if (protocol_ >= 4) {
    char head[9];
    head[0] = static_cast<char>(kFrame);
    for (int i = 0; i < 8; ++i) head[1 + i] = static_cast<char>((frame_.size() >> (8 * i)) & 0xff);
    out_.write(head, sizeof head);
  }
  out_.write(frame_.data(), static_cast<std::streamsize>(frame_.size()));
  frame_.clear();
}

void Writer::none() {
  opcode(kNone);
  end_op();
}

void Writer::boolean(bool value) {
  opcode(value ? kNewTrue : kNewFalse);
  end_op();
}

void Writer::integer(std::int64_t value) {
  if (value >= 0 && value <= 0xff) {
    opcode(kBinInt1);
    uint_le(static_cast<std::uint64_t>(value), 1);
  } else if (value >= 0 && value <= 0xffff) {
    opcode(kBinInt2);
    uint_le(static_cast<std::uint64_t>(value), 2);
  } else if (value >= std::numeric_limits<std::int32_t>::min() && value <= std::numeric_limits<std::int32_t>::max()) {
    opcode(kBinInt);
    uint_le(static_cast<std::uint32_t>(static_cast<std::int32_t>(value)), 4);
  } else {
    // LONG1: the shortest little-endian two's complement (encode_long).
    unsigned char b[8];
    for (int i = 0; i < 8; ++i)
      b[i] = static_cast<unsigned char>((static_cast<std::uint64_t>(value) >> (8 * i)) & 0xff);
    int n = 8;
    while (n > 1 && ((b[n - 1] == 0x00 && b[n - 2] < 0x80) || (b[n - 1] == 0xff && b[n - 2] >= 0x80))) --n;
    opcode(kLong1);
    uint_le(static_cast<std::uint64_t>(n), 1);
    raw(b, static_cast<std::size_t>(n));
  }
  end_op();
}

void Writer::unsigned_integer(std::uint64_t value) {
  if (value <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    return integer(static_cast<std::int64_t>(value));
  // Top bit set: eight bytes and a zero sign byte.
  opcode(kLong1);
  uint_le(9, 1);
  uint_le(value, 8);
  uint_le(0, 1);
  end_op();
}

void Writer::string(std::string_view text) {
  if (auto it = strings_.find(text); it != strings_.end()) return get(it->second);
  if (protocol_ >= 4 && text.size() < 256) {
    opcode(kShortBinUnicode);
    uint_le(text.size(), 1);
  } else if (text.size() <= std::numeric_limits<std::uint32_t>::max()) {
    opcode(kBinUnicode);
    uint_le(text.size(), 4);
  } else if (protocol_ >= 4) {
    opcode(kBinUnicode8);
    uint_le(text.size(), 8);
  } else {
    throw std::length_error("a string over 4 GiB needs pickle protocol 4");
  }
  raw(text.data(), text.size());
  end_op();
  strings_.emplace(std::string(text), put());
}

void Writer::empty_dict() {
  opcode(kEmptyDict);
  end_op();
}

void Writer::empty_list() {
  opcode(kEmptyList);
  end_op();
}

void Writer::mark() {
  opcode(kMark);
  end_op();
}

void Writer::setitems() {
  opcode(kSetItems);
  end_op();
}

void Writer::appends() {
  opcode(kAppends);
  end_op();
}

std::uint32_t Writer::put() {
  if (protocol_ >= 4) {
    opcode(kMemoize);  // index len(memo): every put goes through here, so next_memo_
  } else if (next_memo_ <= 0xff) {
    opcode(kBinPut);
    uint_le(next_memo_, 1);
  } else {
    opcode(kLongBinPut);
    uint_le(next_memo_, 4);
  }
  end_op();
  return next_memo_++;
}

void Writer::get(std::uint32_t index) {
  if (index <= 0xff) {
    opcode(kBinGet);
    uint_le(index, 1);
  } else {
    opcode(kLongBinGet);
    uint_le(index, 4);
  }
  end_op();
}

void Writer::stop() {
  opcode(kStop);
  if (protocol_ >= 4) {
    char head[9];
    head[0] = static_cast<char>(kFrame);
    for (int i = 0; i < 8; ++i) head[1 + i] = static_cast<char>((frame_.size() >> (8 * i)) & 0xff);
    out_.write(head, sizeof head);
  }
  out_.write(frame_.data(), static_cast<std::streamsize>(frame_.size()));
  frame_.clear();
}

}  // namespace gpumem::trace::pickle
