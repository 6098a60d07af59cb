#pragma once
// Reading input files under a size limit, gzip or not; writing output files
// so that a reader never sees half of one: the text goes to a temporary
// file beside the target, which then replaces it.
#include <cstdint>
#include <string>
#include <string_view>

namespace gpumem {

// A file's bytes or, for a gzip file (told by its magic bytes, not its
// name), the bytes it decompresses to, read a piece at a time so that
// max_bytes holds before memory is spent. Over it: InputError "PATH: more
// than N bytes, <limit_reason>" ("decompresses to more than ..." for gzip).
// *gzipped says which it was.
std::string read_file(const std::string& path, std::uint64_t max_bytes, std::string_view limit_reason, bool* gzipped);

// Throws InputError("cannot write PATH: reason") on failure; the target is
// then left as it was. A `size` past the contents extends the file with a
// hole (a sparse file: the rest reads as zeros and takes no disk).
void write_file_atomically(const std::string& path, std::string_view contents, std::uint64_t size = 0);

}  // namespace gpumem
