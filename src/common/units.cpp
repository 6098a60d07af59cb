#include "gpumem/common/units.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace gpumem {

std::string format_bytes(uint64_t bytes) {
  static constexpr std::array<const char*, 7> kUnits = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < kUnits.size()) {
    value /= 1024.0;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %s", value, kUnits[unit]);
  return buf;
}

std::string format_count(uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  out.reserve(digits.size() + digits.size() / 3);
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

namespace {

std::string_view trim_blanks(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return v;
}

// Units are read case-insensitively: 8gb, 8GB and 8Gb are all 8 GB.
bool same_letters(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

bool has_decimal_unit(std::string_view text) {
  text = trim_blanks(text);
  for (std::string_view unit : {"KB", "MB", "GB", "TB"}) {
    if (text.size() > unit.size() && same_letters(text.substr(text.size() - unit.size()), unit)) return true;
  }
  return false;
}

std::optional<uint64_t> parse_bytes(std::string_view text) {
  const auto trim = trim_blanks;
  text = trim(text);
  size_t end = 0;
  while (end < text.size() && ((text[end] >= '0' && text[end] <= '9') || text[end] == '.')) ++end;
  const std::string number(text.substr(0, end));
  if (number.empty() || number.front() == '.' || std::count(number.begin(), number.end(), '.') > 1) return std::nullopt;
  const std::string_view unit = trim(text.substr(end));
  static constexpr std::pair<std::string_view, double> kUnits[] = {{"", 1.0},
                                                                   {"B", 1.0},
                                                                   {"KiB", 1024.0},
                                                                   {"MiB", 1048576.0},
                                                                   {"GiB", 1073741824.0},
                                                                   {"TiB", 1099511627776.0},
                                                                   {"KB", 1e3},
                                                                   {"MB", 1e6},
                                                                   {"GB", 1e9},
                                                                   {"TB", 1e12},
                                                                   // Docker's, Slurm's and ls -h's
                                                                   // forms: binary, as a GPU's
                                                                   // "16G" is.
                                                                   {"K", 1024.0},
                                                                   {"M", 1048576.0},
                                                                   {"G", 1073741824.0},
                                                                   {"T", 1099511627776.0},
                                                                   {"Ki", 1024.0},
                                                                   {"Mi", 1048576.0},
                                                                   {"Gi", 1073741824.0},
                                                                   {"Ti", 1099511627776.0}};
  for (const auto& [name, scale] : kUnits) {
    if (!same_letters(unit, name)) continue;
    if (number.find('.') == std::string::npos && scale == 1.0) {
      uint64_t v = 0;
      for (char c : number) {
        if (v > (uint64_t{1} << 62) / 10) return std::nullopt;
        v = v * 10 + static_cast<uint64_t>(c - '0');
      }
      if (v > (uint64_t{1} << 62)) return std::nullopt;
      return v;
    }
    const double v = std::stod(number) * scale;
    if (!(v >= 0) || v > static_cast<double>(uint64_t{1} << 62)) return std::nullopt;
    return static_cast<uint64_t>(std::llround(v));
  }
  return std::nullopt;
}

std::optional<uint64_t> parse_tokens(std::string_view text) {
  text = trim_blanks(text);
  if (text.empty()) return std::nullopt;
  double scale = 1;
  const char last = static_cast<char>(std::tolower(static_cast<unsigned char>(text.back())));
  if (last == 'k' || last == 'm') {
    scale = last == 'k' ? 1024.0 : 1048576.0;
    text.remove_suffix(1);
  }
  if (text.empty() || text.find_first_not_of("0123456789.") != std::string_view::npos || text.front() == '.' ||
      std::count(text.begin(), text.end(), '.') > 1 || text.size() > 12) {
    return std::nullopt;
  }
  const double tokens = std::stod(std::string(text)) * scale;
  if (tokens != std::floor(tokens) || tokens >= 4294967296.0) return std::nullopt;
  return static_cast<uint64_t>(tokens);
}

std::optional<std::chrono::nanoseconds> parse_duration(std::string_view text) {
  struct Unit {
    std::string_view suffix;
    double ns;
  };
  // Longest suffixes first: "ms" before "s".
  static constexpr std::array<Unit, 6> kUnits{
      {{"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}, {"m", 60e9}, {"h", 3600e9}}};
  for (const Unit& unit : kUnits) {
    if (text.size() <= unit.suffix.size() || text.substr(text.size() - unit.suffix.size()) != unit.suffix) continue;
    const std::string number(text.substr(0, text.size() - unit.suffix.size()));
    if (number.empty() || !(std::isdigit(static_cast<unsigned char>(number.front())) || number.front() == '.')) {
      return std::nullopt;
    }
    char* end = nullptr;
    const double value = std::strtod(number.c_str(), &end);
    if (end != number.c_str() + number.size() || !std::isfinite(value) || value < 0) return std::nullopt;
    const double ns = value * unit.ns;
    if (ns > 86400e9) return std::nullopt;
    return std::chrono::nanoseconds(static_cast<std::int64_t>(std::llround(ns)));
  }
  return std::nullopt;
}

}  // namespace gpumem
