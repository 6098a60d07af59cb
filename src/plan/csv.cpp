#include "gpumem/plan/csv.h"

#include <array>
#include <charconv>
#include <filesystem>
#include <iterator>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

#include "common/file_kind.h"
#include "common/text.h"
#include "gpumem/common/error.h"
#include "gpumem/common/files.h"

namespace gpumem::plan {
namespace {

// Limits that keep every sum the planner forms inside int64: an offset plus a
// size stays under 2^51, and the sizes of all buffers together (hence any
// lower bound) under 2^62 + 2^50. Times only get compared, never added.
constexpr int64_t kMaxBytes = int64_t{1} << 50;  // size, offset, alignment
constexpr int64_t kMaxTime = int64_t{1} << 62;   // lower, upper
constexpr int64_t kMaxTotalBytes = int64_t{1} << 62;
constexpr size_t kMaxFileBytes = size_t{1} << 30;

enum class Column { Id, Lower, Upper, Size, Alignment, Offset, Hint, Gaps };
constexpr size_t kColumns = 8;

struct KnownColumn {
  std::string_view name;
  Column column;
};
// MiniMalloc's names, then the legacy ones (`end` is inclusive there).
constexpr std::array<KnownColumn, 11> kKnownColumns{{
    {"id", Column::Id},
    {"lower", Column::Lower},
    {"upper", Column::Upper},
    {"size", Column::Size},
    {"alignment", Column::Alignment},
    {"offset", Column::Offset},
    {"hint", Column::Hint},
    {"gaps", Column::Gaps},
    {"buffer", Column::Id},
    {"start", Column::Lower},
    {"end", Column::Upper},
}};

[[noreturn]] void fail(const std::string& file, size_t line, const std::string& problem) {
  throw InputError(fmt::format("{}:{}: {}", file, line, problem));
}

using text::Lines;
using text::trim;

// Where each column sits on a line, as the header named it.
struct Header {
  size_t count = 0;                               // fields per line
  std::array<bool, kColumns> present{};           // by Column
  std::array<size_t, kColumns> index{};           // its position on a line
  std::array<std::string_view, kColumns> name{};  // as the header names it, for messages
  bool inclusive_end = false;                     // the legacy `end` column

  bool has(Column c) const { return present[static_cast<size_t>(c)]; }
  std::string_view name_of(Column c) const { return name[static_cast<size_t>(c)]; }
};

Header parse_header(std::string_view line, const std::string& file, size_t line_no) {
  Header h;
  size_t pos = 0;
  while (true) {
    const size_t comma = line.find(',', pos);
    const std::string_view cell = trim(line.substr(pos, comma == std::string_view::npos ? line.npos : comma - pos));
    const KnownColumn* known = nullptr;
    for (const auto& k : kKnownColumns) {
      if (k.name == cell) known = &k;
    }
    if (!known) {
      fail(file, line_no,
           fmt::format("unknown column '{}' (known: id, lower, upper, size, alignment, offset, hint, gaps; "
                       "legacy: buffer, start, end)",
                       printable(cell)));
    }
    const auto c = static_cast<size_t>(known->column);
    if (h.present[c]) {
      fail(file, line_no,
           h.name[c] == known->name
               ? fmt::format("duplicated column '{}'", known->name)
               : fmt::format("duplicated column: '{}' and '{}' are the same column", h.name[c], known->name));
    }
    h.present[c] = true;
    h.index[c] = h.count++;
    h.name[c] = known->name;
    if (known->name == "end") h.inclusive_end = true;
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  for (const Column required : {Column::Id, Column::Lower, Column::Upper, Column::Size}) {
    if (!h.has(required)) {
      const std::string_view names[] = {"id", "lower", "upper", "size"};
      fail(file, line_no, fmt::format("missing required column '{}'", names[static_cast<size_t>(required)]));
    }
  }
  return h;
}

// Splits a data line into exactly header.count cells (trimmed).
void split_fields(std::string_view line, const Header& h, std::array<std::string_view, kColumns>& cells,
                  const std::string& file, size_t line_no) {
  std::array<std::string_view, kColumns> by_position{};
  size_t fields = 0;
  size_t pos = 0;
  while (true) {
    const size_t comma = line.find(',', pos);
    if (fields < h.count) {
      by_position[fields] = trim(line.substr(pos, comma == std::string_view::npos ? line.npos : comma - pos));
    }
    ++fields;
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  if (fields != h.count) {
    fail(file, line_no,
         fmt::format("{} field{}, but the header has {} column{}", fields, fields == 1 ? "" : "s", h.count,
                     h.count == 1 ? "" : "s"));
  }
  for (size_t c = 0; c < kColumns; ++c) {
    if (h.present[c]) cells[c] = by_position[h.index[c]];
  }
}

// A decimal int64 within [min, max] (min is 0 or 1). Only digits with an
// optional leading '-' are accepted: no '+', no exponent, no inner spaces.
int64_t parse_int(std::string_view cell, std::string_view column, int64_t min, int64_t max, std::string_view limit,
                  const std::string& file, size_t line_no) {
  if (cell.empty()) fail(file, line_no, fmt::format("{} is empty", column));
  int64_t value = 0;
  const char* last = cell.data() + cell.size();
  const auto [ptr, ec] = std::from_chars(cell.data(), last, value);
  if (ec == std::errc::invalid_argument || ptr != last) {
    fail(file, line_no, fmt::format("{} '{}' is not an integer", column, printable(cell)));
  }
  const bool out_of_range = ec == std::errc::result_out_of_range;
  // Past int64, the text itself is shown.
  const std::string shown = out_of_range ? printable(cell) : std::to_string(value);
  if (out_of_range ? cell.front() == '-' : value < min) {
    fail(file, line_no,
         min == 0 ? fmt::format("{} ({}) must not be negative", column, shown)
                  : fmt::format("{} must be positive, not {}", column, shown));
  }
  if (out_of_range || value > max) {
    fail(file, line_no, fmt::format("{} {} is over the limit of {}", column, shown, limit));
  }
  return value;
}

constexpr std::string_view kBytesLimit = "2^50 (which keeps offset + size and sums of sizes within 64 bits)";
constexpr std::string_view kTimeLimit = "2^62";

// A decimal in [0, max] inside a gap; `what` names it in messages.
int64_t parse_gap_number(std::string_view text, std::string_view gap, std::string_view what, int64_t max,
                         const std::string& file, size_t line_no) {
  int64_t value = 0;
  const char* last = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), last, value);
  if (text.empty() || ec == std::errc::invalid_argument || ptr != last || text.front() == '-') {
    fail(file, line_no,
         fmt::format("gap '{}': {} '{}' is not a non-negative integer", printable(gap), what, printable(text)));
  }
  if (ec == std::errc::result_out_of_range || value > max) {
    fail(file, line_no, fmt::format("gap '{}': {} is over the limit of {}", printable(gap), what, max));
  }
  return value;
}

// MiniMalloc's gaps: space-separated `lower-upper`, each optionally followed
// by `@begin:end` (the bytes still in use during the gap). With the legacy
// inclusive `end` column, a gap's upper is inclusive too.
std::vector<Gap> parse_gaps(std::string_view cell, bool inclusive_end, const std::string& file, size_t line_no) {
  std::vector<Gap> gaps;
  while (!cell.empty()) {
    const size_t space = cell.find_first_of(" \t");
    const std::string_view token = cell.substr(0, space);
    cell = space == std::string_view::npos ? std::string_view() : trim(cell.substr(space));
    if (token.empty()) continue;
    const size_t at = token.find('@');
    const std::string_view span = token.substr(0, at);
    const size_t dash = span.find('-');
    if (dash == std::string_view::npos) {
      fail(file, line_no, fmt::format("gap '{}' is not lower-upper[@begin:end]", printable(token)));
    }
    Gap g;
    g.lower = parse_gap_number(span.substr(0, dash), token, "lower", kMaxTime, file, line_no);
    g.upper =
        parse_gap_number(span.substr(dash + 1), token, "upper", inclusive_end ? kMaxTime - 1 : kMaxTime, file, line_no);
    if (inclusive_end) ++g.upper;
    if (at != std::string_view::npos) {
      const std::string_view window = token.substr(at + 1);
      const size_t colon = window.find(':');
      if (colon == std::string_view::npos) {
        fail(file, line_no, fmt::format("gap '{}': the window is not begin:end", printable(token)));
      }
      g.window = Window{parse_gap_number(window.substr(0, colon), token, "window begin", kMaxBytes, file, line_no),
                        parse_gap_number(window.substr(colon + 1), token, "window end", kMaxBytes, file, line_no)};
    }
    gaps.push_back(g);
  }
  return gaps;
}

}  // namespace

CsvProblem parse_csv(std::string_view text, const std::string& file_name) {
  if (text.size() > kMaxFileBytes) {
    throw InputError(fmt::format("{}: {} bytes is over the 1 GiB limit for a CSV file", file_name, text.size()));
  }
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // a UTF-8 byte order mark

  Lines lines(text);
  std::string_view line;
  bool have_header = false;
  Header h;
  CsvProblem out;
  // Ids point into `text`, which outlives this call.
  std::unordered_map<std::string_view, size_t> id_lines;
  int64_t total_bytes = 0;
  std::array<std::string_view, kColumns> cells{};
  const auto cell = [&](Column c) { return cells[static_cast<size_t>(c)]; };
  while (lines.next(line)) {
    const size_t n = lines.number();
    if (trim(line).empty()) continue;
    if (!have_header) {
      h = parse_header(line, file_name, n);
      have_header = true;
      out.has_offsets = h.has(Column::Offset);
      continue;
    }
    split_fields(line, h, cells, file_name, n);

    Buffer b;
    const std::string_view id = cell(Column::Id);
    if (id.empty()) fail(file_name, n, fmt::format("{} is empty", h.name_of(Column::Id)));
    if (const auto [it, inserted] = id_lines.emplace(id, n); !inserted) {
      fail(file_name, n, fmt::format("duplicated id '{}', first on line {}", printable(id), it->second));
    }
    b.id = std::string(id);

    const std::string_view lower_name = h.name_of(Column::Lower);
    const std::string_view upper_name = h.name_of(Column::Upper);
    b.lower = parse_int(cell(Column::Lower), lower_name, 0, kMaxTime, kTimeLimit, file_name, n);
    if (h.inclusive_end) {
      const int64_t end = parse_int(cell(Column::Upper), upper_name, 0, kMaxTime - 1, "2^62 - 1", file_name, n);
      if (end < b.lower) {
        fail(file_name, n,
             fmt::format("{} ({}) must not be less than {} ({}); the end is inclusive", upper_name, end, lower_name,
                         b.lower));
      }
      b.upper = end + 1;
    } else {
      b.upper = parse_int(cell(Column::Upper), upper_name, 0, kMaxTime, kTimeLimit, file_name, n);
      if (b.upper <= b.lower) {
        fail(file_name, n,
             fmt::format("{} ({}) must be greater than {} ({})", upper_name, b.upper, lower_name, b.lower));
      }
    }

    b.size = parse_int(cell(Column::Size), "size", 1, kMaxBytes, kBytesLimit, file_name, n);
    total_bytes += b.size;  // at most 2^62 + 2^50: no overflow
    if (total_bytes > kMaxTotalBytes) {
      fail(file_name, n,
           "the sizes of the buffers so far add up to more than 2^62 bytes, the limit that keeps "
           "lower bounds within 64 bits");
    }
    if (h.has(Column::Alignment)) {
      b.alignment = parse_int(cell(Column::Alignment), "alignment", 1, kMaxBytes, kBytesLimit, file_name, n);
    }
    if (h.has(Column::Gaps)) {
      b.gaps = parse_gaps(cell(Column::Gaps), h.inclusive_end, file_name, n);
      if (auto why = gap_error(b)) fail(file_name, n, *why);
    }

    std::optional<int64_t> offset;
    if (h.has(Column::Offset) && !cell(Column::Offset).empty()) {
      offset = parse_int(cell(Column::Offset), "offset", 0, kMaxBytes, kBytesLimit, file_name, n);
      if (*offset % b.alignment != 0) {
        fail(file_name, n,
             fmt::format("misaligned offset: {} is not a multiple of alignment {}", *offset, b.alignment));
      }
    }
    out.problem.buffers.push_back(std::move(b));
    out.offsets.push_back(offset);
  }
  if (!have_header) {
    throw InputError(fmt::format("{}: empty file: no header line (expected id,lower,upper,size)", file_name));
  }
  return out;
}

CsvProblem read_csv(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) throw InputError(fmt::format("{}: no such file", path));
  if (std::filesystem::is_directory(status)) throw InputError(fmt::format("{}: is a directory, not a CSV file", path));
  // A plain file too large is refused before reading; a gzip file is held
  // to the same limit as it decompresses.
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) throw InputError(fmt::format("{}: cannot read its size: {}", path, ec.message()));
  if (size > kMaxFileBytes) {
    throw InputError(fmt::format("{}: {} bytes is over the 1 GiB limit for a CSV file", path, size));
  }
  // `trace convert --to csv -o lifetimes.csv.gz` writes gzip: read it back.
  bool gzipped = false;
  const std::string text = read_file(path, kMaxFileBytes, "the 1 GiB limit for a CSV file", &gzipped);
  if (auto wrong = wrong_kind_error(std::string_view(text).substr(0, 4096), path, {FileKind::PlanCsv},
                                    "a MiniMalloc CSV of buffers"))
    throw InputError(*wrong);
  return parse_csv(text, gzipped ? path + " (decompressed)" : path);
}

std::string write_csv(const Problem& problem, const std::vector<int64_t>& offsets) {
  const auto& buffers = problem.buffers;
  if (!offsets.empty() && offsets.size() != buffers.size()) {
    throw std::invalid_argument(fmt::format("write_csv: {} offsets for {} buffers", offsets.size(), buffers.size()));
  }
  bool alignment = false;
  bool gaps = false;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const std::string& id = buffers[i].id;
    // The format has no quoting: an id must survive parse_csv as it is.
    const char* why = nullptr;
    if (id.empty())
      why = "it is empty";
    else if (id.find(',') != std::string::npos)
      why = "it contains a comma";
    else if (id.find('\n') != std::string::npos)
      why = "it contains a newline";
    else if (id != trim(id))
      why = "it starts or ends with a space or a tab";
    if (why) throw InputError(fmt::format("buffer #{}: id '{}' cannot be written to CSV: {}", i, printable(id), why));
    alignment = alignment || buffers[i].alignment != 1;
    gaps = gaps || !buffers[i].gaps.empty();
  }

  fmt::memory_buffer out;
  fmt::format_to(std::back_inserter(out), "id,lower,upper,size{}{},offset\n", alignment ? ",alignment" : "",
                 gaps ? ",gaps" : "");
  for (size_t i = 0; i < buffers.size(); ++i) {
    const Buffer& b = buffers[i];
    fmt::format_to(std::back_inserter(out), "{},{},{},{}", b.id, b.lower, b.upper, b.size);
    if (alignment) fmt::format_to(std::back_inserter(out), ",{}", b.alignment);
    if (gaps) {
      out.push_back(',');
      for (size_t k = 0; k < b.gaps.size(); ++k) {
        const Gap& g = b.gaps[k];
        fmt::format_to(std::back_inserter(out), "{}{}-{}", k ? " " : "", g.lower, g.upper);
        if (g.window) fmt::format_to(std::back_inserter(out), "@{}:{}", g.window->lower, g.window->upper);
      }
    }
    // Without a plan, the offset column carries the fixed offsets (empty for free buffers).
    if (!offsets.empty()) {
      fmt::format_to(std::back_inserter(out), ",{}\n", offsets[i]);
    } else if (b.fixed_offset) {
      fmt::format_to(std::back_inserter(out), ",{}\n", *b.fixed_offset);
    } else {
      out.append(std::string_view(",\n"));
    }
  }
  return fmt::to_string(out);
}

}  // namespace gpumem::plan
