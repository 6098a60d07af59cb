#pragma once
// A file mapped read-only into memory: weight files are gigabytes, and a
// header read must touch only the pages it reads. Move-only; unmaps on
// destruction.
#include <cstdint>
#include <string>
#include <string_view>

namespace gpumem {

class MappedFile {
 public:
  // Throws InputError naming the path when it cannot be opened or mapped
  // (missing, a directory, unreadable). An empty file maps to no bytes.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::string_view bytes() const { return {data_, size_}; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const char* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace gpumem
