// GPUMEM_ALLOC_CONF: "key:value,key:value", as PYTORCH_CUDA_ALLOC_CONF.
#include "gpumem/alloc/config.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/text.h"
#include "gpumem/common/error.h"

namespace gpumem::alloc {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

using text::trim;

[[noreturn]] void bad_value(std::string_view key, std::string_view value, std::string_view expected) {
  throw InputError(fmt::format("GPUMEM_ALLOC_CONF: key '{}': bad value '{}': expected {}",
                               printable(key), printable(value), expected));
}

double parse_number(std::string_view key, std::string_view value) {
  double number = 0;
  const auto* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, number);
  if (ec != std::errc() || ptr != end || !std::isfinite(number)) bad_value(key, value, "a number");
  return number;
}

// MiB as users write them ("128", "0.5"); whole bytes, at most 2^50.
std::size_t parse_mib(std::string_view key, std::string_view value) {
  double mib = parse_number(key, value);
  if (mib < 0 || mib > double(std::size_t{1} << 30)) bad_value(key, value, "MiB between 0 and 2^30");
  return static_cast<std::size_t>(std::llround(mib * double(kMiB)));
}

std::size_t parse_count(std::string_view key, std::string_view value, std::size_t max) {
  std::size_t n = 0;
  const auto* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, n);
  if (ec != std::errc() || ptr != end || n > max) bad_value(key, value, fmt::format("an integer up to {}", max));
  return n;
}

bool parse_bool(std::string_view key, std::string_view value) {
  if (value == "true" || value == "True" || value == "1") return true;
  if (value == "false" || value == "False" || value == "0") return false;
  bad_value(key, value, "true or false");
}

bool is_power_of_two(std::size_t n) { return n != 0 && (n & (n - 1)) == 0; }

struct Entry {
  std::string_view key;
  std::string_view value;
};

std::vector<Entry> split_entries(std::string_view text) {
  std::vector<Entry> entries;
  while (!text.empty()) {
    std::size_t comma = text.find(',');
    std::string_view item = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (item.empty()) continue;
    std::size_t colon = item.find(':');
    if (colon == std::string_view::npos)
      throw InputError(fmt::format("GPUMEM_ALLOC_CONF: '{}': expected key:value", printable(item)));
    entries.push_back({trim(item.substr(0, colon)), trim(item.substr(colon + 1))});
  }
  return entries;
}

void apply(AllocatorConfig& c, std::string_view key, std::string_view value) {
  if (key == "max_split_size_mb") {
    // PyTorch requires more than the 20 MiB large-segment size; so do we,
    // since smaller thresholds would forbid splitting freshly made segments.
    std::size_t bytes = parse_mib(key, value);
    if (bytes <= 20 * kMiB) bad_value(key, value, "more than 20 (MiB)");
    c.max_split_size = bytes;
  } else if (key == "garbage_collection_threshold") {
    double t = parse_number(key, value);
    if (!(t > 0.0 && t < 1.0)) bad_value(key, value, "a fraction strictly between 0 and 1");
    c.garbage_collection_threshold = t;
  } else if (key == "expandable_segments") {
    c.expandable_segments = parse_bool(key, value);
  } else if (key == "release_before_new_peak") {
    c.release_before_new_peak = parse_bool(key, value);
  } else if (key == "round_bytes") {
    std::size_t n = parse_count(key, value, std::size_t{1} << 20);
    // At least 512: the free index bins block sizes in 512-byte steps.
    if (!is_power_of_two(n) || n < 512) bad_value(key, value, "a power of two, at least 512");
    c.round_bytes = n;
  } else if (key == "small_size_mb") {
    c.small_size = parse_mib(key, value);
  } else if (key == "small_segment_mb") {
    c.small_segment = parse_mib(key, value);
  } else if (key == "large_segment_mb") {
    c.large_segment = parse_mib(key, value);
  } else if (key == "min_large_alloc_mb") {
    c.min_large_alloc = parse_mib(key, value);
  } else if (key == "large_round_mb") {
    std::size_t n = parse_mib(key, value);
    if (n == 0) bad_value(key, value, "more than 0");
    c.large_round = n;
  } else if (key == "large_split_remainder_mb") {
    c.large_split_remainder = parse_mib(key, value);
  } else if (key == "reserved_limit_mb") {
    c.reserved_limit = parse_mib(key, value);
  } else if (key == "history") {
    c.history_capacity = parse_count(key, value, std::size_t{1} << 28);
  } else {
    throw InputError(fmt::format(
        "GPUMEM_ALLOC_CONF: unknown key '{}' (known: preset, max_split_size_mb, "
        "garbage_collection_threshold, expandable_segments, release_before_new_peak, round_bytes, "
        "small_size_mb, small_segment_mb, large_segment_mb, min_large_alloc_mb, large_round_mb, "
        "large_split_remainder_mb, reserved_limit_mb, history)",
        printable(key)));
  }
}

void check_consistent(const AllocatorConfig& c) {
  if (c.small_segment < c.small_size)
    throw InputError(fmt::format("GPUMEM_ALLOC_CONF: small_segment_mb ({} bytes) is below small_size_mb ({} bytes)",
                                 c.small_segment, c.small_size));
  if (c.small_segment % c.round_bytes != 0 || c.large_round % c.round_bytes != 0 ||
      c.large_segment % c.round_bytes != 0)
    throw InputError("GPUMEM_ALLOC_CONF: segment sizes must be multiples of round_bytes");
}

}  // namespace

AllocatorConfig AllocatorConfig::pytorch_defaults() {
  AllocatorConfig c;
  c.release_before_new_peak = false;
  return c;
}

AllocatorConfig parse_allocator_config(std::string_view text, AllocatorConfig base) {
  std::vector<Entry> entries = split_entries(text);
  // A preset replaces everything, so it applies first wherever it is written.
  for (const Entry& e : entries) {
    if (e.key != "preset") continue;
    if (e.value == "gpumem") base = AllocatorConfig::gpumem_defaults();
    else if (e.value == "pytorch") base = AllocatorConfig::pytorch_defaults();
    else bad_value(e.key, e.value, "gpumem or pytorch");
  }
  for (const Entry& e : entries)
    if (e.key != "preset") apply(base, e.key, e.value);
  check_consistent(base);
  return base;
}

AllocatorConfig allocator_config_from_env() {
  const char* text = std::getenv("GPUMEM_ALLOC_CONF");
  return text ? parse_allocator_config(text) : AllocatorConfig::gpumem_defaults();
}

std::string to_string(const AllocatorConfig& c) {
  auto mib = [](std::size_t bytes) { return fmt::format("{}", double(bytes) / double(kMiB)); };
  std::string s = fmt::format(
      "round_bytes:{},small_size_mb:{},small_segment_mb:{},large_segment_mb:{},min_large_alloc_mb:{},"
      "large_round_mb:{},large_split_remainder_mb:{}",
      c.round_bytes, mib(c.small_size), mib(c.small_segment), mib(c.large_segment), mib(c.min_large_alloc),
      mib(c.large_round), mib(c.large_split_remainder));
  if (c.max_split_size != SIZE_MAX) s += ",max_split_size_mb:" + mib(c.max_split_size);
  if (c.garbage_collection_threshold > 0)
    s += fmt::format(",garbage_collection_threshold:{}", c.garbage_collection_threshold);
  s += fmt::format(",expandable_segments:{},release_before_new_peak:{}", c.expandable_segments,
                   c.release_before_new_peak);
  if (c.reserved_limit) s += ",reserved_limit_mb:" + mib(c.reserved_limit);
  if (c.history_capacity) s += fmt::format(",history:{}", c.history_capacity);
  return s;
}

}  // namespace gpumem::alloc
