// The page around the figures: head (CSP, style, error hook), sections,
// facts, tables, and the script that marks the page ready.
#include <fmt/format.h>

#include "gpumem/report/html/document.h"
#include "report/html/page_assets.h"

namespace gpumem::report::html {

std::string escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

Document::Document(std::string title) : title_(std::move(title)) {}

void Document::heading(const std::string& text) { body_ += "<h2>" + escape(text) + "</h2>\n"; }

void Document::paragraph(const std::string& text) { body_ += "<p>" + escape(text) + "</p>\n"; }

void Document::facts(const std::vector<std::pair<std::string, std::string>>& facts) {
  body_ += "<dl class=\"facts\">";
  for (const auto& [name, value] : facts) body_ += "<dt>" + escape(name) + "</dt><dd>" + escape(value) + "</dd>";
  body_ += "</dl>\n";
}

void Document::table(const Table& t) {
  body_ += "<table>";
  if (!t.caption.empty()) body_ += "<caption>" + escape(t.caption) + "</caption>";
  body_ += "<thead><tr>";
  for (std::size_t i = 0; i < t.header.size(); ++i) {
    const bool numeric = t.numeric_from_second && i > 0;
    body_ += (numeric ? "<th class=\"n\">" : "<th>") + escape(t.header[i]) + "</th>";
  }
  body_ += "</tr></thead><tbody>";
  for (const auto& row : t.rows) {
    body_ += "<tr>";
    for (std::size_t i = 0; i < row.size(); ++i) {
      const bool numeric = t.numeric_from_second && i > 0;
      body_ += (numeric ? "<td class=\"n\">" : "<td>") + escape(row[i]) + "</td>";
    }
    body_ += "</tr>";
  }
  body_ += "</tbody></table>\n";
}

std::string Document::html() const {
  std::string page;
  page.reserve(body_.size() + 8192);
  page += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  page += fmt::format("<meta http-equiv=\"Content-Security-Policy\" content=\"{}\">\n", kContentSecurityPolicy);
  page += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  page += "<meta name=\"generator\" content=\"gpumem\">\n";
  page += "<title>" + escape(title_) + "</title>\n";
  page += "<style>" + std::string(kStyle) + "</style>\n";
  page += "<script>" + std::string(kErrorScript) + "</script>\n";
  page += "</head>\n<body>\n";
  page += "<div id=\"gpumem-errors\" role=\"alert\" hidden></div>\n";
  page += "<h1>" + escape(title_) + "</h1>\n";
  page += body_;
  page += "<p class=\"note\">Made by gpumem. This page loads nothing: everything it shows is in this file.</p>\n";
  page += "<script>" + std::string(kMainScript) + "</script>\n</body>\n</html>\n";
  return page;
}

}  // namespace gpumem::report::html
