#include "cli/output_files.h"
#include "cli/streams.h"

#include <cstdio>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/common/files.h"
#include "gpumem/common/units.h"

namespace gpumem::cli {

void add_html_flag(CLI::App& cmd, std::string& path) {
  cmd.add_option("--html", path, "Also write a self-contained HTML report here (opens offline in any browser)")
      ->type_name("FILE");
}

void write_html(const std::string& path, const std::string& html) { write_output(path, html, "HTML report"); }

void write_output(const std::string& path, std::string_view contents, std::string_view what) {
  write_file_atomically(path, contents);
  announce_written(path, what);
}

void announce_written(const std::string& path, std::string_view what) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  std::fputs(
      fmt::format("gpumem: wrote {} ({}{})\n", printable(path), what, ec ? std::string() : ", " + format_bytes(size))
          .c_str(),
      err());
}

}  // namespace gpumem::cli
