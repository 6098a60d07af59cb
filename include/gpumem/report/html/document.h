#pragma once
// Self-contained HTML reports: one file with its SVG, CSS and JavaScript
// inline, no network request (a Content-Security-Policy forbids any), that
// opens offline in any browser. Every figure comes with a table of its
// numbers, for copying and for screen readers.
//
// The page marks itself loaded (<html data-gpumem-ready="1">) once its
// script ran, and writes any script error or blocked request into
// #gpumem-errors, so a headless browser test can tell a good page from a
// broken one.
#include <string>
#include <utility>
#include <vector>

#include "gpumem/report/html/charts.h"

namespace gpumem::report::html {

struct Table {
  std::string caption;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  bool numeric_from_second = true;  // right-align every column but the first
};

class Document {
 public:
  explicit Document(std::string title);
  void heading(const std::string& text);                                      // a section
  void paragraph(const std::string& text);                                    // escaped
  void facts(const std::vector<std::pair<std::string, std::string>>& facts);  // a definition list
  void line_chart(const LineChart& chart);
  void rect_chart(const RectChart& chart);
  void table(const Table& table);
  std::string html() const;

 private:
  std::string title_;
  std::string body_;
};

// Escapes & < > " ' for text and attribute values.
std::string escape(const std::string& text);

}  // namespace gpumem::report::html
