// GPUMEM_ALLOC_CONF: "key:value,key:value", as PYTORCH_CUDA_ALLOC_CONF.
#include "gpumem/alloc/config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "alloc/free_index.h"
#include "common/text.h"
#include "gpumem/common/error.h"

namespace gpumem::alloc {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

using text::trim;

[[noreturn]] void bad_value(std::string_view key, std::string_view value, std::string_view expected) {
  throw InputError(fmt::format("GPUMEM_ALLOC_CONF: key '{}': bad value '{}': expected {}", printable(key),
                               printable(value), expected));
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

std::size_t parse_count(std::string_view key, std::string_view value) {
  std::size_t n = 0;
  const auto* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, n);
  if (ec != std::errc() || ptr != end) bad_value(key, value, "a whole number");
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
  // Only syntax here: what the values must satisfy is validate()'s, which
  // parse_allocator_config runs on the result.
  if (key == "max_split_size_mb") {
    c.max_split_size = parse_mib(key, value);
  } else if (key == "garbage_collection_threshold") {
    c.garbage_collection_threshold = parse_number(key, value);
  } else if (key == "expandable_segments") {
    c.expandable_segments = parse_bool(key, value);
  } else if (key == "release_before_new_peak") {
    c.release_before_new_peak = parse_bool(key, value);
  } else if (key == "round_bytes") {
    c.round_bytes = parse_count(key, value);
  } else if (key == "small_size_mb") {
    c.small_size = parse_mib(key, value);
  } else if (key == "small_segment_mb") {
    c.small_segment = parse_mib(key, value);
  } else if (key == "large_segment_mb") {
    c.large_segment = parse_mib(key, value);
  } else if (key == "min_large_alloc_mb") {
    c.min_large_alloc = parse_mib(key, value);
  } else if (key == "large_round_mb") {
    c.large_round = parse_mib(key, value);
  } else if (key == "large_split_remainder_mb") {
    c.large_split_remainder = parse_mib(key, value);
  } else if (key == "reserved_limit_mb") {
    c.reserved_limit = parse_mib(key, value);
  } else if (key == "history") {
    c.history_capacity = parse_count(key, value);
  } else if (key == "publish_interval_ms") {
    c.publish_interval_ms = parse_count(key, value);
  } else if (key == "planned") {
    c.planned = parse_bool(key, value);
  } else if (key == "planned_shapes") {
    c.planned_shapes = parse_count(key, value);
  } else if (key == "planned_virtual_arena_mb") {
    c.planned_virtual_arena = parse_mib(key, value);
  } else {
    throw InputError(fmt::format(
        "GPUMEM_ALLOC_CONF: unknown key '{}' (known: preset, max_split_size_mb, "
        "garbage_collection_threshold, expandable_segments, release_before_new_peak, round_bytes, "
        "small_size_mb, small_segment_mb, large_segment_mb, min_large_alloc_mb, large_round_mb, "
        "large_split_remainder_mb, reserved_limit_mb, history, publish_interval_ms, planned, planned_shapes, "
        "planned_virtual_arena_mb)",
        printable(key)));
  }
}

// A setting as errors name it: by its field in AllocatorConfig, or by the
// GPUMEM_ALLOC_CONF key that sets it (oversize_slack has none).
struct Setting {
  std::string_view field;
  std::string_view key;
};

constexpr Setting kRoundBytes{"round_bytes", "round_bytes"};
constexpr Setting kSmallSize{"small_size", "small_size_mb"};
constexpr Setting kSmallSegment{"small_segment", "small_segment_mb"};
constexpr Setting kLargeSegment{"large_segment", "large_segment_mb"};
constexpr Setting kLargeRound{"large_round", "large_round_mb"};
constexpr Setting kMaxSplitSize{"max_split_size", "max_split_size_mb"};
constexpr Setting kOversizeSlack{"oversize_slack", "oversize_slack"};
constexpr Setting kGarbageCollection{"garbage_collection_threshold", "garbage_collection_threshold"};
constexpr Setting kHistory{"history_capacity", "history"};
constexpr Setting kPublishInterval{"publish_interval_ms", "publish_interval_ms"};
constexpr Setting kPlannedShapes{"planned_shapes", "planned_shapes"};

// Far above any device, and low enough that sums and roundings of sizes
// (requests are at most 2^60 bytes) cannot overflow.
constexpr std::size_t kMaxSizeSetting = std::size_t{1} << 50;
constexpr std::size_t kMaxHistory = std::size_t{1} << 28;

// The rules of validate() (config.h says why each holds), with errors that
// begin with `source` and name settings by key or by field.
void check(const AllocatorConfig& c, std::string_view source, bool by_key) {
  auto name = [&](Setting s) { return by_key ? s.key : s.field; };
  auto fail = [&](Setting s, const std::string& value, const std::string& rule) {
    throw InputError(fmt::format("{}: {} is {}; {}", source, name(s), value, rule));
  };
  auto bytes = [](std::size_t n) { return fmt::format("{} bytes", n); };
  auto at_most_limit = [&](Setting s, std::size_t n) {
    if (n > kMaxSizeSetting) fail(s, bytes(n), fmt::format("it must be at most 2^50 ({})", bytes(kMaxSizeSetting)));
  };
  auto multiple_of_rounding = [&](Setting s, std::size_t n) {
    at_most_limit(s, n);
    if (n % c.round_bytes != 0)
      fail(s, bytes(n), fmt::format("it must be a multiple of {} ({})", name(kRoundBytes), bytes(c.round_bytes)));
  };

  constexpr std::size_t kUnit = detail::FreeIndex::kUnit;
  if (c.round_bytes < kUnit || !is_power_of_two(c.round_bytes))
    fail(kRoundBytes, bytes(c.round_bytes), fmt::format("it must be a power of two, at least {}", kUnit));
  at_most_limit(kRoundBytes, c.round_bytes);
  multiple_of_rounding(kSmallSegment, c.small_segment);
  if (c.small_segment < c.small_size)
    fail(kSmallSegment, bytes(c.small_segment),
         fmt::format("it must be at least {} ({})", name(kSmallSize), bytes(c.small_size)));
  multiple_of_rounding(kLargeSegment, c.large_segment);
  if (c.large_round == 0) fail(kLargeRound, bytes(0), "it must be more than 0");
  multiple_of_rounding(kLargeRound, c.large_round);
  if (c.max_split_size <= std::max(c.small_segment, c.large_segment))
    fail(kMaxSplitSize, bytes(c.max_split_size),
         fmt::format("it must be more than {} ({}) and {} ({}): a segment that big is never split for "
                     "the smaller requests it is made for",
                     name(kSmallSegment), bytes(c.small_segment), name(kLargeSegment), bytes(c.large_segment)));
  if (c.oversize_slack == 0) fail(kOversizeSlack, bytes(0), "it must be more than 0");
  at_most_limit(kOversizeSlack, c.oversize_slack);
  if (!(c.garbage_collection_threshold >= 0.0 && c.garbage_collection_threshold < 1.0))
    fail(kGarbageCollection, fmt::format("{}", c.garbage_collection_threshold),
         "it must be a fraction in [0, 1) (0: off)");
  if (c.history_capacity > kMaxHistory)
    fail(kHistory, fmt::format("{}", c.history_capacity), fmt::format("it must be at most 2^28 ({})", kMaxHistory));
  if (c.publish_interval_ms > 60'000)
    fail(kPublishInterval, fmt::format("{}", c.publish_interval_ms), "it must be at most 60000 (a minute; 0: off)");
  if (c.planned_shapes > 1024)
    fail(kPlannedShapes, fmt::format("{}", c.planned_shapes), "it must be at most 1024 (each keeps a plan)");
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
  // Publishing is not an allocator policy: a preset keeps it.
  for (const Entry& e : entries) {
    if (e.key != "preset") continue;
    const std::size_t publish = base.publish_interval_ms;
    const bool planned = base.planned;
    const std::size_t shapes = base.planned_shapes;
    const std::size_t virtual_arena = base.planned_virtual_arena;
    if (e.value == "gpumem")
      base = AllocatorConfig::gpumem_defaults();
    else if (e.value == "pytorch")
      base = AllocatorConfig::pytorch_defaults();
    else
      bad_value(e.key, e.value, "gpumem or pytorch");
    base.publish_interval_ms = publish;
    base.planned = planned;
    base.planned_shapes = shapes;
    base.planned_virtual_arena = virtual_arena;
  }
  for (const Entry& e : entries)
    if (e.key != "preset") apply(base, e.key, e.value);
  check(base, "GPUMEM_ALLOC_CONF", /*by_key=*/true);
  return base;
}

void validate(const AllocatorConfig& config) { check(config, "AllocatorConfig", /*by_key=*/false); }

AllocatorConfig allocator_config_from_env(AllocatorConfig base) {
  const char* text = std::getenv("GPUMEM_ALLOC_CONF");
  return text ? parse_allocator_config(text, base) : base;
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
  if (c.publish_interval_ms) s += fmt::format(",publish_interval_ms:{}", c.publish_interval_ms);
  if (c.planned) s += ",planned:true";
  if (c.planned_shapes != AllocatorConfig{}.planned_shapes) s += fmt::format(",planned_shapes:{}", c.planned_shapes);
  if (c.planned_virtual_arena != AllocatorConfig{}.planned_virtual_arena)
    s += ",planned_virtual_arena_mb:" + mib(c.planned_virtual_arena);
  return s;
}

}  // namespace gpumem::alloc
