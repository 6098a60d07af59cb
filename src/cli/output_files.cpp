#include "cli/html_flag.h"

#include <cstdio>

#include "gpumem/common/files.h"
#include "gpumem/common/units.h"

namespace gpumem::cli {

void add_html_flag(CLI::App& cmd, std::string& path) {
  cmd.add_option("--html", path, "Also write a self-contained HTML report here (opens offline in any browser)");
}

void write_html(const std::string& path, const std::string& html) {
  write_file_atomically(path, html);
  std::fprintf(stderr, "gpumem: wrote %s (%s)\n", path.c_str(), format_bytes(html.size()).c_str());
}

}  // namespace gpumem::cli
