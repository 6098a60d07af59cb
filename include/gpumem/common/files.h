#pragma once
// Writing output files so that a reader never sees half of one: the text
// goes to a temporary file beside the target, which then replaces it.
#include <string>
#include <string_view>

namespace gpumem {

// Throws InputError("cannot write PATH: reason") on failure; the target is
// then left as it was.
void write_file_atomically(const std::string& path, std::string_view contents);

}  // namespace gpumem
