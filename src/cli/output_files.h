#pragma once
// Files a command writes besides its stdout: --html OUT and -o/--output. Each
// is written atomically and announced the same way on stderr ("gpumem: wrote
// report.html (HTML report, 1.21 MiB)"), so stdout stays the command's own
// output and no written file goes unsaid.
#include <cstdint>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

namespace gpumem::cli {

void add_html_flag(CLI::App& cmd, std::string& path);
void write_html(const std::string& path, const std::string& html);

// Writes `contents` to `path` atomically, then announces it.
void write_output(const std::string& path, std::string_view contents, std::string_view what);
// For files a library function wrote: "gpumem: wrote PATH (WHAT, SIZE)".
void announce_written(const std::string& path, std::string_view what);

}  // namespace gpumem::cli
