// The README's and docs/'s examples are the binary's real output. Every
// fenced block line that starts with `$ gpumem ...` is run from the source
// root, and
// what it prints (stdout, then stderr) must equal the lines that follow the
// command, up to:
//   - durations ("0.26 ms", "0.04 s") and search-node counts, which vary
//     from run to run;
//   - trailing spaces, and blank lines at the end;
//   - a line that is just "..." in the README, which stands for any number
//     of lines (an excerpt).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli/cli_runner.h"

namespace gpumem::test {
namespace {

struct Example {
  std::string file;  // relative to the source root, for messages
  size_t line = 0;   // of the command in that file
  std::string args;  // after "gpumem "
  std::vector<std::string> expected;
};

std::string rstrip(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.pop_back();
  return s;
}

std::string mask(const std::string& line) {
  static const std::regex duration(R"(\b\d+(\.\d+)? (ms|s)\b)");
  static const std::regex nodes(R"(\b[\d,]+ search nodes\b)");
  return std::regex_replace(std::regex_replace(rstrip(line), duration, "<time>"), nodes, "<n> search nodes");
}

std::vector<Example> readme_examples(const std::string& root, const std::string& file) {
  std::ifstream in(root + "/" + file);
  std::vector<Example> out;
  std::string line;
  size_t number = 0;
  bool in_block = false;
  Example* current = nullptr;
  while (std::getline(in, line)) {
    ++number;
    if (line.rfind("```", 0) == 0) {
      in_block = !in_block;
      current = nullptr;
      continue;
    }
    if (!in_block) continue;
    if (line.rfind("$ gpumem ", 0) == 0) {
      out.push_back({file, number, line.substr(9), {}});
      current = &out.back();
    } else if (current) {
      current->expected.push_back(line);
    }
  }
  for (Example& ex : out) {
    while (!ex.expected.empty() && rstrip(ex.expected.back()).empty()) ex.expected.pop_back();
  }
  return out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  while (!lines.empty() && rstrip(lines.back()).empty()) lines.pop_back();
  return lines;
}

// Whether `actual` matches `expected`, where an expected "..." matches any
// run of lines (including none).
bool matches(const std::vector<std::string>& expected, size_t e, const std::vector<std::string>& actual, size_t a) {
  if (e == expected.size()) return a == actual.size();
  if (rstrip(expected[e]) == "...") {
    for (size_t skip = a; skip <= actual.size(); ++skip) {
      if (matches(expected, e + 1, actual, skip)) return true;
    }
    return false;
  }
  return a < actual.size() && mask(expected[e]) == mask(actual[a]) && matches(expected, e + 1, actual, a + 1);
}

// README.md, then docs/*.md in name order.
std::vector<std::string> documents(const std::string& root) {
  std::vector<std::string> docs;
  for (const auto& entry : std::filesystem::directory_iterator(root + "/docs")) {
    if (entry.path().extension() == ".md") docs.push_back("docs/" + entry.path().filename().string());
  }
  std::sort(docs.begin(), docs.end());
  docs.insert(docs.begin(), "README.md");
  return docs;
}

TEST(Readme, EveryCommandShownPrintsWhatTheReadmeShows) {
  const std::string root = GPUMEM_SOURCE_DIR;
  std::vector<Example> examples;
  for (const auto& doc : documents(root)) {
    const auto found = readme_examples(root, doc);
    examples.insert(examples.end(), found.begin(), found.end());
  }
  // They show at least inspect, plan, trace stats, replay and an error.
  ASSERT_GE(examples.size(), 5u);
  for (const Example& ex : examples) {
    SCOPED_TRACE(ex.file + ":" + std::to_string(ex.line) + ": gpumem " + ex.args);
    const CliRun r = run_in(root, ex.args);
    const std::vector<std::string> actual = lines_of(r.out + r.err);
    if (!matches(ex.expected, 0, actual, 0)) {
      ADD_FAILURE() << "the README shows:\n"
                    <<
          [&] {
            std::string s;
            for (const auto& l : ex.expected) s += l + "\n";
            return s;
          }() << "the binary prints:\n"
                    << r.out + r.err;
    }
  }
}

// The comparison itself: it must be able to fail.
TEST(Readme, TheComparisonCatchesDriftButNotTimings) {
  EXPECT_TRUE(matches({"Solver      exact, 3.81 ms, 82 search nodes"}, 0,
                      {"Solver      exact, 12.50 ms, 1,024 search nodes"}, 0));
  EXPECT_FALSE(matches({"Arena  3.38 MiB"}, 0, {"Arena  3.39 MiB"}, 0));
  EXPECT_FALSE(matches({"a"}, 0, {"a", "b"}, 0));
  EXPECT_TRUE(matches({"a", "...", "d"}, 0, {"a", "b", "c", "d"}, 0));
  EXPECT_FALSE(matches({"a", "...", "d"}, 0, {"a", "b", "c"}, 0));
}

}  // namespace
}  // namespace gpumem::test
