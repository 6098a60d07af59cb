#include "gpumem/common/files.h"

#include <fcntl.h>
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
#include <vector>

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/common/gzip.h"

namespace gpumem {
namespace {

constexpr std::size_t kReadPiece = std::size_t{1} << 20;

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// The inputs of the command running on this thread, when one is; see
// InputsOfThisCommand.
struct OpenedInputs {
  int depth = 0;
  std::vector<std::pair<dev_t, ino_t>> files;
};
OpenedInputs& opened_inputs() {
  thread_local OpenedInputs inputs;
  return inputs;
}

// Before an output is made: the target must be a regular file or absent,
// and none of this command's inputs.
void check_output_target(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;  // absent (or unreachable: the write says why)
  if (!S_ISREG(st.st_mode))
    throw InputError(fmt::format("cannot write {}: it is {}, and gpumem writes only regular files", printable(path),
                                 kind_of(st.st_mode)));
  const OpenedInputs& inputs = opened_inputs();
  for (const auto& [dev, ino] : inputs.files)
    if (dev == st.st_dev && ino == st.st_ino)
      throw InputError(
          fmt::format("cannot write {}: it is an input of this command; write the output elsewhere", printable(path)));
}

}  // namespace

InputsOfThisCommand::InputsOfThisCommand() {
  if (opened_inputs().depth++ == 0) opened_inputs().files.clear();
}

InputsOfThisCommand::~InputsOfThisCommand() {
  if (--opened_inputs().depth == 0) opened_inputs().files.clear();
}

int open_regular_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO with no writer would otherwise wait forever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT) throw InputError(fmt::format("{}: no such file", printable(path)));
    if (e == ELOOP) throw InputError(fmt::format("{}: a loop of symbolic links", printable(path)));
    throw InputError(fmt::format("{}: cannot open: {}", printable(path), std::strerror(e)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw InputError(fmt::format("{}: cannot read its status: {}", printable(path), std::strerror(e)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(fmt::format("{}: is {}, not a file gpumem can read", printable(path), kind_of(st.st_mode)));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  if (opened_inputs().depth > 0) opened_inputs().files.emplace_back(st.st_dev, st.st_ino);
  return fd;
}

std::string read_file(const std::string& path, std::uint64_t max_bytes, std::string_view limit_reason, bool* gzipped) {
  const int fd = open_regular_file(path);
  const std::unique_ptr<std::FILE, FileCloser> file(::fdopen(fd, "rb"));
  if (!file) {
    const int e = errno;
    ::close(fd);
    throw InputError(fmt::format("{}: cannot open the file: {}", printable(path), std::strerror(e)));
  }
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
  check_output_target(path_);
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
