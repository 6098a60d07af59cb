#include "gpumem/common/files.h"

#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/common/gzip.h"

namespace gpumem {
namespace {

constexpr std::size_t kReadPiece = std::size_t{1} << 20;

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

}  // namespace

std::string read_file(const std::string& path, std::uint64_t max_bytes, std::string_view limit_reason, bool* gzipped) {
  const std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file) throw InputError(fmt::format("{}: cannot open the file: {}", printable(path), std::strerror(errno)));
  const std::string over_limit = fmt::format("more than {} bytes, {}", max_bytes, limit_reason);
  std::string piece(kReadPiece, '\0');
  std::string data;
  std::optional<gzip::Inflater> inflater;
  for (bool first = true;; first = false) {
    const std::size_t n = std::fread(piece.data(), 1, piece.size(), file.get());
    if (n == 0) break;
    const std::string_view bytes(piece.data(), n);
    if (first && gzip::has_magic(bytes)) {
      inflater.emplace(path, max_bytes, "decompresses to " + over_limit);
    } else if (first) {
      // The size only saves copies as the string grows; the loop counts.
      struct stat st {};
      if (::fstat(::fileno(file.get()), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
        data.reserve(
            static_cast<std::size_t>(std::min<std::uint64_t>(static_cast<std::uint64_t>(st.st_size), max_bytes)));
    }
    if (inflater) {
      inflater->feed(bytes, data);
    } else {
      if (n > max_bytes - std::min<std::uint64_t>(max_bytes, data.size()))
        throw InputError(fmt::format("{}: {}", printable(path), over_limit));
      data.append(bytes);
    }
  }
  if (std::ferror(file.get()))
    throw InputError(fmt::format("{}: read error: {}", printable(path), std::strerror(errno)));
  if (inflater) inflater->finish();
  *gzipped = inflater.has_value();
  return data;
}

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)) {
  const std::filesystem::path target(path_);
  std::string name = ".";
  name += target.filename().string();
  name += ".XXXXXX";
  const std::filesystem::path dir = target.parent_path().empty() ? std::filesystem::path(".") : target.parent_path();
  tmp_ = (dir / name).string();
  fd_ = mkstemp(tmp_.data());
  if (fd_ < 0) {
    tmp_.clear();
    throw InputError("cannot write " + path_ + ": " + std::strerror(errno));
  }
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!tmp_.empty()) std::remove(tmp_.c_str());
}

void AtomicFileWriter::fail(const std::string& why) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  std::remove(tmp_.c_str());
  tmp_.clear();
  throw InputError("cannot write " + path_ + ": " + why);
}

void AtomicFileWriter::write(std::string_view bytes) {
  if (fd_ < 0) fail("the file is already closed");
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  written_ += bytes.size();
}

void AtomicFileWriter::extend_to(std::uint64_t size) {
  if (fd_ < 0) fail("the file is already closed");
  if (size > written_ && ::ftruncate(fd_, static_cast<off_t>(size)) != 0) fail(std::strerror(errno));
}

void AtomicFileWriter::commit() {
  if (fd_ < 0) fail("the file is already closed");
  // mkstemp makes the file private; give it the permissions a plain
  // open() would have.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd_, 0666 & ~mask) != 0 || ::fsync(fd_) != 0) fail(std::strerror(errno));
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail(std::strerror(errno));
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) fail(std::strerror(errno));
  tmp_.clear();
}

void write_file_atomically(const std::string& path, std::string_view contents, std::uint64_t size) {
  AtomicFileWriter out(path);
  out.write(contents);
  out.extend_to(size);
  out.commit();
}

}  // namespace gpumem
