#include "gpumem/common/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/common/files.h"

namespace gpumem {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  const int fd = open_regular_file(path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw InputError(fmt::format("{}: {}", printable(path), std::strerror(err)));
  }
  size_ = static_cast<uint64_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw InputError(fmt::format("{}: cannot map: {}", path, std::strerror(err)));
    }
    data_ = static_cast<const char*>(p);
  }
  ::close(fd);  // the mapping stays valid
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<char*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_) ::munmap(const_cast<char*>(data_), size_);
    path_ = std::move(other.path_);
    data_ = other.data_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

}  // namespace gpumem
