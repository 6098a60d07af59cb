// gzip through zlib: inflate with a limit on what comes out and messages
// that place each problem in the compressed file; deflate for writers.
#include "gpumem/common/gzip.h"

#include <algorithm>
#include <new>
#include <stdexcept>

#include <fmt/format.h>
#include <zlib.h>

#include "gpumem/common/error.h"

namespace gpumem::gzip {
namespace {

// zlib counts the bytes of one call in 32 bits: larger inputs go in pieces.
constexpr std::size_t kMaxPiece = std::size_t{1} << 30;
constexpr std::uint64_t kBombFloor = std::uint64_t{64} << 20;
constexpr std::uint64_t kBombRatio = 100;
// Output is produced this much at a time, so the limit is checked at least
// this often, whatever one input byte expands to.
constexpr std::size_t kOutputChunk = std::size_t{256} << 10;
// windowBits for zlib: 15 (deflate's largest window) + 16 (gzip wrapping,
// not zlib's own).
constexpr int kGzipWindowBits = 15 + 16;

Bytef* bytes_of(std::string_view s) { return reinterpret_cast<Bytef*>(const_cast<char*>(s.data())); }

}  // namespace

bool has_magic(std::string_view head) {
  return head.size() >= 2 && static_cast<unsigned char>(head[0]) == 0x1f && static_cast<unsigned char>(head[1]) == 0x8b;
}

struct Inflater::Stream {
  z_stream z{};
  std::unique_ptr<Bytef[]> output{new Bytef[kOutputChunk]};
  Stream() {
    const int rc = inflateInit2(&z, kGzipWindowBits);
    if (rc == Z_MEM_ERROR) throw std::bad_alloc();
    if (rc != Z_OK) throw std::runtime_error(fmt::format("zlib's inflateInit2 failed ({})", rc));
  }
  ~Stream() { inflateEnd(&z); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
};

Inflater::Inflater(std::string name, std::uint64_t max_bytes, std::string over_limit)
    : stream_(std::make_unique<Stream>()),
      name_(std::move(name)),
      max_bytes_(max_bytes),
      over_limit_(std::move(over_limit)) {}

Inflater::~Inflater() = default;

void Inflater::fail(std::uint64_t byte, std::string_view problem) const {
  throw InputError(fmt::format("{}: byte {}: {}", printable(name_), byte, problem));
}

void Inflater::fail_on_zlib_error(std::uint64_t byte, const char* zlib_message) const {
  const std::string_view message = zlib_message ? zlib_message : "";
  // zlib's messages have not changed in decades; these are the ones whose
  // place and cause can be said better than zlib says them.
  if (message == "incorrect header check") {
    if (members_ == 1) fail(member_start_, "not gzip data (it does not start with the bytes 1f 8b)");
    fail(member_start_, "data after the end of the gzip stream that is not another gzip member");
  }
  if (message == "unknown compression method")
    fail(member_start_ + 2, "gzip header: unknown compression method (8, deflate, is the only one)");
  if (message == "unknown header flags set") fail(member_start_ + 3, "gzip header: reserved flag bits are set");
  if (message == "header crc mismatch") fail(byte, "gzip header: its CRC-16 does not match the header");
  // zlib reports the trailer's checks after reading the field checked.
  if (message == "incorrect data check")
    fail(byte - std::min<std::uint64_t>(byte, 4),
         fmt::format("gzip member {}: the CRC-32 in its trailer does not match its data (the file is corrupt)",
                     members_));
  if (message == "incorrect length check")
    fail(byte - std::min<std::uint64_t>(byte, 4),
         fmt::format("gzip member {}: the length in its trailer does not match its data (the file is corrupt)",
                     members_));
  fail(byte,
       fmt::format("gzip member {}: corrupt deflate data ({})", members_, message.empty() ? "no detail" : message));
}

void Inflater::feed(std::string_view compressed, std::string& out) {
  z_stream& z = stream_->z;
  while (!compressed.empty()) {
    if (between_members_) {
      // A new member: zlib starts over; the output goes on.
      if (members_ > 0 && inflateReset(&z) != Z_OK) throw std::logic_error("zlib's inflateReset failed");
      between_members_ = false;
      member_start_ = offset_;
      member_first_byte_ = static_cast<unsigned char>(compressed.front());
      ++members_;
    }
    const std::size_t piece = std::min(compressed.size(), kMaxPiece);
    z.next_in = bytes_of(compressed);
    z.avail_in = static_cast<uInt>(piece);
    int rc = Z_OK;
    do {
      z.next_out = stream_->output.get();
      z.avail_out = static_cast<uInt>(kOutputChunk);
      rc = inflate(&z, Z_NO_FLUSH);
      const std::uint64_t place = offset_ + (piece - z.avail_in);
      // The limit before the data's own errors: the bytes before a damaged
      // place are the same however the file was cut into reads, so which
      // error a file gets does not depend on the reads either.
      const std::size_t produced = kOutputChunk - z.avail_out;
      if (produced > max_bytes_ - std::min<std::uint64_t>(max_bytes_, out.size())) fail(place, over_limit_);
      out.append(reinterpret_cast<const char*>(stream_->output.get()), produced);
      // Real traces and models compress 20 times at most (the test data:
      // 17); a bomb does a thousand. Past 64 MiB, more than 100 times what
      // was read stops here, long before max_bytes of memory is spent.
      if (out.size() > kBombFloor && out.size() / kBombRatio > place)
        fail(place, fmt::format("decompresses to more than {} times its size: a gzip bomb, not a file gpumem reads",
                                kBombRatio));
      if (rc == Z_DATA_ERROR) fail_on_zlib_error(place, z.msg);
      if (rc == Z_MEM_ERROR) throw std::bad_alloc();
      if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
        throw std::logic_error(fmt::format("zlib's inflate returned {}", rc));
      // Z_BUF_ERROR: nothing more to do until more input comes.
    } while (rc == Z_OK && (z.avail_in > 0 || z.avail_out == 0));
    const std::size_t used = piece - z.avail_in;
    // zlib always moves with fresh output room; a stall would loop forever.
    if (used == 0 && rc != Z_STREAM_END) throw std::logic_error("zlib's inflate consumed nothing");
    offset_ += used;
    compressed.remove_prefix(used);
    if (rc == Z_STREAM_END) between_members_ = true;
  }
}

void Inflater::finish() {
  if (members_ == 0) fail(0, "empty: no gzip member");
  if (between_members_) return;
  // One stray byte after a complete member is too short for zlib to judge.
  if (members_ > 1 && offset_ - member_start_ == 1 && member_first_byte_ != 0x1f)
    fail(member_start_, "data after the end of the gzip stream that is not another gzip member");
  fail(offset_, fmt::format("the file ends inside gzip member {} (it is truncated)", members_));
}

std::string decompress(std::string_view compressed, const std::string& name, std::uint64_t max_bytes) {
  Inflater inflater(name, max_bytes, fmt::format("decompresses to more than {} bytes, the limit", max_bytes));
  std::string out;
  inflater.feed(compressed, out);
  inflater.finish();
  return out;
}

std::string compress(std::string_view data) {
  struct Deflater {
    z_stream z{};
    Deflater() {
      const int rc = deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, kGzipWindowBits, 8, Z_DEFAULT_STRATEGY);
      if (rc == Z_MEM_ERROR) throw std::bad_alloc();
      if (rc != Z_OK) throw std::runtime_error(fmt::format("zlib's deflateInit2 failed ({})", rc));
    }
    ~Deflater() { deflateEnd(&z); }
    Deflater(const Deflater&) = delete;
    Deflater& operator=(const Deflater&) = delete;
  } deflater;
  z_stream& z = deflater.z;
  std::string out;
  out.reserve(data.size() / 4 + 64);
  std::unique_ptr<Bytef[]> buffer(new Bytef[kOutputChunk]);
  int rc = Z_OK;
  do {
    const std::size_t piece = std::min(data.size(), kMaxPiece);
    const int flush = piece == data.size() ? Z_FINISH : Z_NO_FLUSH;
    z.next_in = bytes_of(data);
    z.avail_in = static_cast<uInt>(piece);
    do {
      z.next_out = buffer.get();
      z.avail_out = static_cast<uInt>(kOutputChunk);
      rc = deflate(&z, flush);
      if (rc == Z_STREAM_ERROR) throw std::logic_error("zlib's deflate failed");
      out.append(reinterpret_cast<const char*>(buffer.get()), kOutputChunk - z.avail_out);
    } while (z.avail_out == 0);
    data.remove_prefix(piece - z.avail_in);
  } while (rc != Z_STREAM_END);
  return out;
}

}  // namespace gpumem::gzip
