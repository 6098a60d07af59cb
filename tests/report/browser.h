#pragma once
// Loads a page in headless Chromium (Debian's `chromium`) and says what the
// browser saw: the DOM after the page's scripts ran, every console message,
// and a screenshot.
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "test_paths.h"

namespace gpumem::test {

inline bool have_chromium() { return std::system("command -v chromium >/dev/null 2>&1") == 0; }

struct BrowserRun {
  std::string dom;                   // --dump-dom
  std::vector<std::string> console;  // console messages and JavaScript errors
  int exit_code = -1;
};

inline std::string run_capture(const std::string& command) {
  std::string out;
  if (FILE* p = popen(command.c_str(), "r")) {
    char buf[65536];
    for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    pclose(p);
  }
  return out;
}

// Common flags: no sandbox (tests may run as root), nothing from the
// network (every host resolves to nowhere), no first-run chores.
inline std::string chromium_flags(const std::string& profile) {
  return "--headless=new --no-sandbox --disable-gpu --no-first-run --no-default-browser-check "
         "--disable-extensions --disable-background-networking --disable-component-update "
         "--host-resolver-rules='MAP * ~NOTFOUND' --user-data-dir='" +
         profile + "' --enable-logging=stderr --v=0 ";
}

inline BrowserRun load_page(const std::string& path, const std::string& screenshot = "") {
  BrowserRun run;
  const std::string base = testing::TempDir() + "chromium_" + std::to_string(getpid());
  const std::string log = base + ".log";
  run.dom = run_capture("timeout 60 chromium " + chromium_flags(base + "_profile") +
                        "--virtual-time-budget=2000 --dump-dom 'file://" + path + "' 2>'" + log + "'");
  const std::string errors = read_file_bytes(log);
  // Chromium logs console output as "...:INFO:CONSOLE:<line>] \"message\",
  // source: ..." (older versions: "CONSOLE(<line>)"), uncaught errors too.
  static const std::regex console(R"(CONSOLE(?::\d+|\(\d+\))\] (.*))");
  std::smatch m;
  std::string::const_iterator from = errors.begin();
  while (std::regex_search(from, errors.end(), m, console)) {
    run.console.push_back(m[1].str());
    from = m[0].second;
  }
  if (!screenshot.empty()) {
    run_capture("timeout 60 chromium " + chromium_flags(base + "_profile") +
                "--hide-scrollbars --window-size=1100,720 --virtual-time-budget=2000 --screenshot='" + screenshot +
                "' 'file://" + path + "' 2>/dev/null");
  }
  return run;
}

inline std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

}  // namespace gpumem::test
