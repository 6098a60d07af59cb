#include "gpumem/common/files.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include "gpumem/common/error.h"

namespace gpumem {

void write_file_atomically(const std::string& path, std::string_view contents) {
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
