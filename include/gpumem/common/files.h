#pragma once
// Reading input files under a size limit, gzip or not; writing output files
// so that a reader never sees half of one: the text goes to a temporary
// file beside the target, which then replaces it.
#include <cstdint>
#include <string>
#include <string_view>

namespace gpumem {

// Opens an input for reading, or throws a one-line InputError that says
// what is wrong: no such file, a symbolic link loop, a directory, or not a
// regular file at all (a FIFO, a device, a socket), which gpumem refuses up
// front rather than block on or read forever. Returns the descriptor
// (close-on-exec, blocking); the caller closes it.
int open_regular_file(const std::string& path);

// While one lives on a thread, every file open_regular_file opens there is
// remembered, and an output that is one of them (the same file, by device
// and inode, under whatever name) is refused: a command never overwrites
// its own input. The command line holds one per command.
class InputsOfThisCommand {
 public:
  InputsOfThisCommand();
  ~InputsOfThisCommand();
  InputsOfThisCommand(const InputsOfThisCommand&) = delete;
  InputsOfThisCommand& operator=(const InputsOfThisCommand&) = delete;
};

// A file's bytes or, for a gzip file (told by its magic bytes, not its
// name), the bytes it decompresses to, read a piece at a time so that
// max_bytes holds before memory is spent. Over it: InputError "PATH: more
// than N bytes, <limit_reason>" ("decompresses to more than ..." for gzip).
// *gzipped says which it was.
std::string read_file(const std::string& path, std::uint64_t max_bytes, std::string_view limit_reason, bool* gzipped);

// Throws InputError("cannot write PATH: reason") on failure; the target is
// then left as it was. A target that exists and is not a regular file (a
// device, a FIFO: the rename would replace it) or that is an input of the
// running command is refused before anything is written. A `size` past the contents extends the file with a
// hole (a sparse file: the rest reads as zeros and takes no disk).
void write_file_atomically(const std::string& path, std::string_view contents, std::uint64_t size = 0);

// The same, a piece at a time, for outputs too large to build in memory:
// the pieces go to a temporary file beside `path`, and commit() renames it
// onto `path`. Destroyed without commit() (an error on the way), the
// temporary file is removed and `path` is left as it was. Every failure is
// InputError("cannot write PATH: reason").
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::string path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(std::string_view bytes);
  // Extends the file to `size` bytes with a hole when it is shorter.
  void extend_to(std::uint64_t size);
  std::uint64_t written() const { return written_; }
  // Flushes to disk, gives the file the permissions a plain open() would,
  // and renames it onto the target.
  void commit();

 private:
  [[noreturn]] void fail(const std::string& why);
  std::string path_;
  std::string tmp_;
  int fd_ = -1;
  std::uint64_t written_ = 0;
};

}  // namespace gpumem
