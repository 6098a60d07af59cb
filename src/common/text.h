#pragma once
// Text helpers every line-based reader shares (MiniMalloc CSV, RMM logs,
// gpumem history, GPUMEM_ALLOC_CONF): trimming and numbered lines.
#include <cstddef>
#include <string_view>

namespace gpumem::text {

// Without leading and trailing spaces and tabs.
inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The text's lines, numbered from 1, without their '\n' or a '\r' before it.
// A final newline does not start another line.
class Lines {
 public:
  explicit Lines(std::string_view text) : rest_(text) {}
  bool next(std::string_view& line) {
    if (rest_.empty()) return false;
    const std::size_t nl = rest_.find('\n');
    if (nl == std::string_view::npos) {
      line = rest_;
      rest_ = {};
    } else {
      line = rest_.substr(0, nl);
      rest_.remove_prefix(nl + 1);
    }
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    ++number_;
    return true;
  }
  std::size_t number() const { return number_; }

 private:
  std::string_view rest_;
  std::size_t number_ = 0;
};

}  // namespace gpumem::text
