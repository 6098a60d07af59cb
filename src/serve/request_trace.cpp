#include "gpumem/serve/request_trace.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "common/file_kind.h"
#include "common/text.h"
#include "gpumem/common/error.h"
#include "gpumem/common/files.h"

namespace gpumem::serve {
namespace {

struct Place {
  const std::string& name;
  size_t line;
  [[noreturn]] void fail(const std::string& problem) const {
    throw InputError(fmt::format("{}: line {}: {}", name, line, problem));
  }
};

std::string shown(std::string_view s) { return printable(s.size() > 40 ? std::string(s.substr(0, 40)) + "..." : s); }

uint32_t parse_count(std::string_view field, const char* key, const Place& at) {
  field = text::trim(field);
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
  if (field.empty() || ec == std::errc::invalid_argument || end != field.data() + field.size()) {
    if (!field.empty() && field.front() == '-') at.fail(fmt::format("{} '{}' is negative", key, shown(field)));
    at.fail(fmt::format("{} '{}' is not a whole number", key, shown(field)));
  }
  if (ec == std::errc::result_out_of_range || v > UINT32_MAX)
    at.fail(fmt::format("{} {} is too large (at most {})", key, shown(field), UINT32_MAX));
  return static_cast<uint32_t>(v);
}

double parse_seconds(std::string_view field, const Place& at) {
  field = text::trim(field);
  double v = 0;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
  if (field.empty() || ec != std::errc() || end != field.data() + field.size() || !std::isfinite(v))
    at.fail(fmt::format("arrival_s '{}' is not a number of seconds", shown(field)));
  if (v < 0) at.fail(fmt::format("arrival_s {} is negative", shown(field)));
  return v;
}

// Checks one request against the ones before it and the model.
void check(const Request& r, double previous_arrival, uint32_t max_model_len, const Place& at) {
  if (r.prompt_tokens == 0) at.fail("prompt_tokens is 0 (a request has at least one prompt token)");
  if (r.output_tokens == 0) at.fail("output_tokens is 0 (a request generates at least one token)");
  if (r.arrival_s < previous_arrival)
    at.fail(fmt::format("arrival_s {} is before the previous request's {} (arrivals must be in order)", r.arrival_s,
                        previous_arrival));
  if (r.prefix_tokens > r.prompt_tokens)
    at.fail(fmt::format("prefix_tokens {} is more than prompt_tokens {}", r.prefix_tokens, r.prompt_tokens));
  const uint64_t total = uint64_t{r.prompt_tokens} + r.output_tokens;
  if (max_model_len != 0 && total > max_model_len)
    at.fail(fmt::format("prompt_tokens + output_tokens = {} is longer than max_model_len {}", total, max_model_len));
}

constexpr std::string_view kKeys[] = {"arrival_s", "prompt_tokens", "output_tokens", "prefix_group", "prefix_tokens"};
constexpr const char* kHeaderHelp = "arrival_s,prompt_tokens,output_tokens[,prefix_group[,prefix_tokens]]";

std::vector<std::string_view> split(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  for (;;) {
    const size_t comma = line.find(',', start);
    fields.push_back(line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return fields;
}

Request from_json_line(std::string_view line, const Place& at) {
  nlohmann::json j;
  try {
    j = parse_bounded_json(line, fmt::format("{}: line {}", at.name, at.line));
  } catch (const nlohmann::json::exception&) {
    at.fail(
        "not a JSON object (JSON lines: one {\"arrival_s\": ..., \"prompt_tokens\": ..., \"output_tokens\": ...} "
        "per line)");
  }
  if (!j.is_object()) at.fail("not a JSON object");
  Request r;
  bool has[5] = {};
  for (const auto& [key, value] : j.items()) {
    const auto it = std::find(std::begin(kKeys), std::end(kKeys), key);
    if (it == std::end(kKeys))
      at.fail(
          fmt::format("unknown key '{}' (keys: arrival_s, prompt_tokens, output_tokens, prefix_group, "
                      "prefix_tokens)",
                      shown(key)));
    const size_t k = static_cast<size_t>(it - std::begin(kKeys));
    has[k] = true;
    if (k == 3 && value.is_null()) {
      r.prefix_group = -1;
      continue;
    }
    if (!value.is_number()) at.fail(fmt::format("{} is not a number", key));
    if (k == 0) {
      const double v = value.get<double>();
      if (!std::isfinite(v)) at.fail("arrival_s is not a number of seconds");
      if (v < 0) at.fail(fmt::format("arrival_s {} is negative", v));
      r.arrival_s = v;
      continue;
    }
    if (value.is_number_float()) at.fail(fmt::format("{} {} is not a whole number", key, json_text(value)));
    if (value.is_number_integer() && value.get<int64_t>() < 0)
      at.fail(fmt::format("{} {} is negative", key, json_text(value)));
    const uint64_t v = value.get<uint64_t>();
    if (v > (k == 3 ? uint64_t{INT64_MAX} : uint64_t{UINT32_MAX}))
      at.fail(fmt::format("{} {} is too large", key, json_text(value)));
    if (k == 1) r.prompt_tokens = static_cast<uint32_t>(v);
    if (k == 2) r.output_tokens = static_cast<uint32_t>(v);
    if (k == 3) r.prefix_group = static_cast<int64_t>(v);
    if (k == 4) r.prefix_tokens = static_cast<uint32_t>(v);
  }
  for (size_t k = 0; k < 3; ++k)
    if (!has[k]) at.fail(fmt::format("no {}", kKeys[k]));
  if (has[4] && r.prefix_group < 0) at.fail("prefix_tokens without a prefix_group");
  if (has[3] && r.prefix_group >= 0 && !has[4]) r.prefix_tokens = UINT32_MAX;  // the group's shortest prompt, below
  return r;
}

}  // namespace

std::vector<Request> parse_request_trace(std::string_view text, const std::string& name, uint32_t max_model_len,
                                         uint64_t max_requests) {
  text::Lines lines(text);
  std::string_view line;
  std::vector<Request> out;
  bool json = false, header_seen = false;
  size_t columns = 0;
  double previous = 0;
  while (lines.next(line)) {
    const Place at{name, lines.number()};
    const std::string_view trimmed = text::trim(line);
    if (trimmed.empty()) continue;
    if (!header_seen) {
      header_seen = true;
      if (trimmed.front() == '{') {
        json = true;
      } else {
        const auto fields = split(trimmed);
        columns = fields.size();
        bool ok = columns >= 3 && columns <= 5;
        for (size_t i = 0; ok && i < columns; ++i) ok = text::trim(fields[i]) == kKeys[i];
        if (!ok) at.fail(fmt::format("expected the header {} or a JSON object, got '{}'", kHeaderHelp, shown(trimmed)));
        continue;
      }
    }
    if (out.size() == max_requests)
      at.fail(fmt::format("more than {} requests, the most a trace may hold", max_requests));
    Request r;
    if (json) {
      r = from_json_line(trimmed, at);
    } else {
      const auto fields = split(trimmed);
      // The prefix columns may be left off a row.
      if (fields.size() < 3 || fields.size() > columns)
        at.fail(fmt::format("{} fields where the header has {}", fields.size(), columns));
      r.arrival_s = parse_seconds(fields[0], at);
      r.prompt_tokens = parse_count(fields[1], "prompt_tokens", at);
      r.output_tokens = parse_count(fields[2], "output_tokens", at);
      const bool has_tokens = fields.size() == 5 && !text::trim(fields[4]).empty();
      if (fields.size() >= 4 && !text::trim(fields[3]).empty()) {
        r.prefix_group = parse_count(fields[3], "prefix_group", at);
        r.prefix_tokens = has_tokens ? parse_count(fields[4], "prefix_tokens", at) : UINT32_MAX;
      } else if (has_tokens) {
        at.fail("prefix_tokens without a prefix_group");
      }
    }
    const uint32_t prefix = r.prefix_tokens;
    if (prefix == UINT32_MAX) r.prefix_tokens = 0;
    check(r, previous, max_model_len, at);
    r.prefix_tokens = prefix;
    previous = r.arrival_s;
    r.id = out.size();
    out.push_back(r);
  }
  if (out.empty()) throw InputError(name + ": no requests");
  // A group without prefix_tokens shares its shortest prompt.
  std::map<int64_t, uint32_t> shortest;
  for (const Request& r : out)
    if (r.prefix_tokens == UINT32_MAX) {
      auto [it, fresh] = shortest.emplace(r.prefix_group, r.prompt_tokens);
      if (!fresh) it->second = std::min(it->second, r.prompt_tokens);
    }
  for (Request& r : out)
    if (r.prefix_tokens == UINT32_MAX) r.prefix_tokens = shortest[r.prefix_group];
  return out;
}

std::vector<Request> read_request_trace(const std::string& path, uint32_t max_model_len) {
  bool gzipped = false;
  // A gzip stream is looked into only once read: it may hold either kind.
  if (auto wrong = wrong_kind_error(path, {FileKind::RequestTrace, FileKind::MemoryTrace}, "a request trace"))
    throw InputError(*wrong);
  const std::string text = read_file(path, kMaxTraceBytes, "the most a request trace may hold", &gzipped);
  if (auto wrong =
          wrong_kind_error(std::string_view(text).substr(0, 4096), path, {FileKind::RequestTrace}, "a request trace"))
    throw InputError(*wrong);
  return parse_request_trace(text, path, max_model_len);
}

std::string request_trace_csv(const std::vector<Request>& requests) {
  const bool groups =
      std::any_of(requests.begin(), requests.end(), [](const Request& r) { return r.prefix_group >= 0; });
  std::string out = groups ? "arrival_s,prompt_tokens,output_tokens,prefix_group,prefix_tokens\n"
                           : "arrival_s,prompt_tokens,output_tokens\n";
  for (const Request& r : requests) {
    out += fmt::format("{:.3f},{},{}", r.arrival_s, r.prompt_tokens, r.output_tokens);
    if (groups) out += r.prefix_group >= 0 ? fmt::format(",{},{}", r.prefix_group, r.prefix_tokens) : ",,";
    out += '\n';
  }
  return out;
}

}  // namespace gpumem::serve
