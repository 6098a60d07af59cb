#include "gpumem/common/files.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

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
        data.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(static_cast<std::uint64_t>(st.st_size), max_bytes)));
    }
    if (inflater) {
      inflater->feed(bytes, data);
    } else {
      if (n > max_bytes - std::min<std::uint64_t>(max_bytes, data.size()))
        throw InputError(fmt::format("{}: {}", printable(path), over_limit));
      data.append(bytes);
    }
  }
  if (std::ferror(file.get())) throw InputError(fmt::format("{}: read error: {}", printable(path), std::strerror(errno)));
  if (inflater) inflater->finish();
  *gzipped = inflater.has_value();
  return data;
}

void write_file_atomically(const std::string& path, std::string_view contents, std::uint64_t size) {
  const std::filesystem::path target(path);
  std::string name = ".";
  name += target.filename().string();
  name += ".XXXXXX";
  const std::filesystem::path dir = target.parent_path().empty() ? std::filesystem::path(".") : target.parent_path();
  std::string tmp = (dir / name).string();
  const int fd = mkstemp(tmp.data());
  if (fd < 0) throw InputError("cannot write " + path + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string why = std::strerror(errno);
      ::close(fd);
      std::remove(tmp.c_str());
      throw InputError("cannot write " + path + ": " + why);
    }
    done += static_cast<size_t>(n);
  }
  if (size > contents.size() && ::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    std::remove(tmp.c_str());
    throw InputError("cannot write " + path + ": " + why);
  }
  // mkstemp makes the file private; give it the permissions a plain
  // open() would have.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd, 0666 & ~mask) != 0 || ::fsync(fd) != 0 || ::close(fd) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw InputError("cannot write " + path + ": " + why);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw InputError("cannot write " + path + ": " + why);
  }
}

}  // namespace gpumem
