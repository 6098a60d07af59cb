#pragma once
// --html OUT, as every command with a picture takes it.
#include <string>

#include <CLI/CLI.hpp>

namespace gpumem::cli {

void add_html_flag(CLI::App& cmd, std::string& path);
// Writes the page atomically and says where on stderr ("gpumem: wrote
// report.html (1.21 MiB)"), so stdout stays the command's own output.
void write_html(const std::string& path, const std::string& html);

}  // namespace gpumem::cli
