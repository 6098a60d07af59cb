// GPUMEM_ALLOC_CONF parsing: every key, presets, and errors that name the
// key; and the validation every allocator applies to its config, however
// the config was made.
#include <cmath>
#include <cstdlib>
#include <functional>

#include <gtest/gtest.h>

#include "gpumem/alloc/caching_allocator.h"
#include "gpumem/alloc/config.h"
#include "gpumem/alloc/planned_allocator.h"
#include "gpumem/alloc/simulated_device.h"
#include "gpumem/common/error.h"

namespace gpumem::alloc {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

std::string error_of_base(std::string_view text, const AllocatorConfig& base) {
  try {
    parse_allocator_config(text, base);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string error_of(std::string_view text) { return error_of_base(text, AllocatorConfig::gpumem_defaults()); }

TEST(AllocatorConfig, PytorchDefaultsMatchItsDocumentedConstants) {
  AllocatorConfig c = AllocatorConfig::pytorch_defaults();
  EXPECT_EQ(c.round_bytes, 512u);
  EXPECT_EQ(c.small_size, 1 * kMiB);
  EXPECT_EQ(c.small_segment, 2 * kMiB);
  EXPECT_EQ(c.large_segment, 20 * kMiB);
  EXPECT_EQ(c.min_large_alloc, 10 * kMiB);
  EXPECT_EQ(c.large_round, 2 * kMiB);
  EXPECT_EQ(c.large_split_remainder, 1 * kMiB);
  EXPECT_FALSE(c.release_before_new_peak);
  EXPECT_FALSE(c.expandable_segments);
}

TEST(AllocatorConfig, ParsesEveryKey) {
  AllocatorConfig c = parse_allocator_config(
      "max_split_size_mb:128, garbage_collection_threshold:0.6,expandable_segments:True,"
      "release_before_new_peak:false,round_bytes:1024,small_size_mb:0.5,small_segment_mb:4,large_segment_mb:16,"
      "min_large_alloc_mb:8,large_round_mb:4,large_split_remainder_mb:0.25,reserved_limit_mb:1024,history:1000");
  EXPECT_EQ(c.max_split_size, 128 * kMiB);
  EXPECT_DOUBLE_EQ(c.garbage_collection_threshold, 0.6);
  EXPECT_TRUE(c.expandable_segments);
  EXPECT_FALSE(c.release_before_new_peak);
  EXPECT_EQ(c.round_bytes, 1024u);
  EXPECT_EQ(c.small_size, kMiB / 2);
  EXPECT_EQ(c.small_segment, 4 * kMiB);
  EXPECT_EQ(c.large_segment, 16 * kMiB);
  EXPECT_EQ(c.min_large_alloc, 8 * kMiB);
  EXPECT_EQ(c.large_round, 4 * kMiB);
  EXPECT_EQ(c.large_split_remainder, kMiB / 4);
  EXPECT_EQ(c.reserved_limit, 1024 * kMiB);
  EXPECT_EQ(c.history_capacity, 1000u);
}

TEST(AllocatorConfig, PresetAppliesFirstWhereverWritten) {
  AllocatorConfig c = parse_allocator_config("expandable_segments:true,preset:pytorch");
  EXPECT_EQ(c.large_segment, 20 * kMiB);
  EXPECT_TRUE(c.expandable_segments);
}

TEST(AllocatorConfig, RoundTripsThroughToString) {
  AllocatorConfig c = parse_allocator_config("preset:pytorch,max_split_size_mb:200,history:10");
  AllocatorConfig back = parse_allocator_config(to_string(c));
  EXPECT_EQ(to_string(back), to_string(c));
  EXPECT_EQ(back.max_split_size, 200 * kMiB);
}

TEST(AllocatorConfig, PublishIntervalSurvivesPresetsAndRoundTrips) {
  AllocatorConfig base;
  base.publish_interval_ms = 5;  // what the PyTorch plugin starts from
  EXPECT_EQ(parse_allocator_config("preset:pytorch", base).publish_interval_ms, 5u);
  EXPECT_EQ(parse_allocator_config("publish_interval_ms:0,preset:pytorch", base).publish_interval_ms, 0u);
  const AllocatorConfig c = parse_allocator_config("publish_interval_ms:250");
  EXPECT_EQ(c.publish_interval_ms, 250u);
  EXPECT_EQ(parse_allocator_config(to_string(c)).publish_interval_ms, 250u);
  EXPECT_NE(error_of("publish_interval_ms:60001").find("publish_interval_ms is 60001"), std::string::npos)
      << error_of("publish_interval_ms:60001");
}

TEST(AllocatorConfig, PlannedIsAKeyAPresetKeeps) {
  EXPECT_FALSE(parse_allocator_config("").planned);
  const AllocatorConfig c = parse_allocator_config("planned:true,preset:pytorch");
  EXPECT_TRUE(c.planned);
  EXPECT_FALSE(c.release_before_new_peak) << "the preset still applies";
  EXPECT_TRUE(parse_allocator_config(to_string(c)).planned);
  EXPECT_NE(error_of("planned:maybe").find("planned"), std::string::npos);
  EXPECT_EQ(parse_allocator_config("").planned_shapes, 8u);
  const AllocatorConfig shapes = parse_allocator_config("planned_shapes:3,preset:gpumem");
  EXPECT_EQ(shapes.planned_shapes, 3u) << "a preset keeps it";
  EXPECT_EQ(parse_allocator_config(to_string(shapes)).planned_shapes, 3u);
  const AllocatorConfig arena = parse_allocator_config("planned_virtual_arena_mb:0,preset:pytorch");
  EXPECT_EQ(arena.planned_virtual_arena, 0u) << "a preset keeps it";
  EXPECT_EQ(parse_allocator_config(to_string(arena)).planned_virtual_arena, 0u);
  EXPECT_EQ(parse_allocator_config("").planned_virtual_arena, std::size_t{16} << 20);
  EXPECT_EQ(planned_options(parse_allocator_config("planned_shapes:2,planned_virtual_arena_mb:64")).virtual_arena_bytes,
            std::size_t{64} << 20);
  EXPECT_EQ(planned_options(parse_allocator_config("planned_shapes:2")).max_shapes, 2u);
  EXPECT_NE(error_of("planned_shapes:1025").find("planned_shapes is 1025"), std::string::npos)
      << error_of("planned_shapes:1025");
}

TEST(AllocatorConfig, ErrorsNameTheKey) {
  EXPECT_NE(error_of("max_split_size:128").find("unknown key 'max_split_size'"), std::string::npos);
  EXPECT_NE(error_of("max_split_size_mb:ten").find("key 'max_split_size_mb': bad value 'ten'"), std::string::npos);
  // What parses but breaks a rule is validate()'s error, naming keys.
  EXPECT_NE(error_of("max_split_size_mb:10")
                .find("GPUMEM_ALLOC_CONF: max_split_size_mb is 10485760 bytes; it must be more than "
                      "small_segment_mb (2097152 bytes) and large_segment_mb (20971520 bytes)"),
            std::string::npos)
      << error_of("max_split_size_mb:10");
  EXPECT_NE(error_of("garbage_collection_threshold:1.5").find("garbage_collection_threshold"), std::string::npos);
  EXPECT_NE(error_of("expandable_segments:yes").find("true or false"), std::string::npos);
  EXPECT_NE(error_of("round_bytes:300").find("power of two"), std::string::npos);
  EXPECT_NE(error_of("preset:tensorflow").find("gpumem or pytorch"), std::string::npos);
  EXPECT_NE(error_of("expandable_segments").find("expected key:value"), std::string::npos);
  EXPECT_NE(error_of("small_size_mb:4").find("small_segment_mb is 2097152 bytes; it must be at least small_size_mb"),
            std::string::npos);
  EXPECT_NE(error_of("history:268435457").find("history is 268435457"), std::string::npos);
  EXPECT_NE(error_of("large_round_mb:0").find("large_round_mb is 0 bytes"), std::string::npos);
  EXPECT_EQ(error_of(""), "");
  EXPECT_EQ(error_of(" , ,"), "");
}

TEST(AllocatorConfig, ReadsTheEnvironment) {
  ::setenv("GPUMEM_ALLOC_CONF", "expandable_segments:true", 1);
  EXPECT_TRUE(allocator_config_from_env().expandable_segments);
  ::setenv("GPUMEM_ALLOC_CONF", "bogus:1", 1);
  EXPECT_THROW(allocator_config_from_env(), InputError);
  ::unsetenv("GPUMEM_ALLOC_CONF");
  EXPECT_FALSE(allocator_config_from_env().expandable_segments);
}

TEST(AllocatorConfig, ValidatesTheBaseItAppliesKeysTo) {
  AllocatorConfig base;
  base.oversize_slack = 0;
  EXPECT_NE(error_of_base("", base).find("oversize_slack is 0 bytes"), std::string::npos);
  EXPECT_EQ(error_of_base("", AllocatorConfig::gpumem_defaults()), "");
}

TEST(AllocatorConfigValidation, IsAPublicFunction) {
  EXPECT_NO_THROW(validate(AllocatorConfig::gpumem_defaults()));
  EXPECT_NO_THROW(validate(AllocatorConfig::pytorch_defaults()));
  AllocatorConfig c;
  c.round_bytes = 256;
  try {
    validate(c);
    FAIL() << "round_bytes 256 passed";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "AllocatorConfig: round_bytes is 256 bytes; it must be a power of two, at least 512");
  }
}

// What constructing an allocator over a simulated device with `config`
// throws ("" when it accepts the config).
std::string construction_error(const AllocatorConfig& config) {
  SimulatedDevice device;
  try {
    CachingAllocator allocator(simulated_upstream(device), config);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// The review's reproduction: with 256-byte rounding set in C++, a freed
// 256-byte block sat in the free index's 512-byte bin, allocate(512) took it,
// and the split rule's `b->size - size` wrapped around, so the block grew over
// its live neighbour. Such a config must not make an allocator at all.
TEST(AllocatorConfigValidation, RejectsTheRoundingThatLetBlocksOverlap) {
  SimulatedDevice device;
  AllocatorConfig config;
  config.round_bytes = 256;
  try {
    CachingAllocator a(simulated_upstream(device), config);
    void* first = a.allocate(256);
    void* neighbour = a.allocate(256);
    a.deallocate(first, 256);
    void* grown = a.allocate(512);
    const auto start = reinterpret_cast<std::uintptr_t>(grown);
    const auto live = reinterpret_cast<std::uintptr_t>(neighbour);
    ADD_FAILURE() << "round_bytes 256 was accepted; allocate(512) returned " << grown << ", "
                  << (live >= start && live < start + 512 ? "overlapping" : "next to") << " the live block at "
                  << neighbour;
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("round_bytes is 256 bytes"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(AllocatorConfigValidation, RejectsASmallSegmentThatIsNotAMultipleOfTheRounding) {
  AllocatorConfig config;
  config.small_size = 512;
  config.small_segment = 1000;
  const std::string message = construction_error(config);
  EXPECT_NE(message.find("small_segment is 1000 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("multiple of round_bytes (512 bytes)"), std::string::npos) << message;
}

// One broken field at a time, from otherwise valid configs: each must be
// refused, and the message must name the field and its value.
struct BrokenField {
  const char* name;
  std::function<void(AllocatorConfig&)> apply;
  const char* message;  // a part of the expected error
};

void PrintTo(const BrokenField& field, std::ostream* out) { *out << field.name; }

class EveryRule : public ::testing::TestWithParam<BrokenField> {};

TEST_P(EveryRule, IsCheckedWhenTheAllocatorIsMade) {
  AllocatorConfig config;
  GetParam().apply(config);
  const std::string message = construction_error(config);
  EXPECT_NE(message.find(GetParam().message), std::string::npos) << "got: '" << message << "'";
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

const BrokenField kBrokenFields[] = {
    {"RoundBytesZero", [](AllocatorConfig& c) { c.round_bytes = 0; }, "round_bytes is 0 bytes"},
    {"RoundBytesBelow512", [](AllocatorConfig& c) { c.round_bytes = 256; }, "round_bytes is 256 bytes"},
    {"RoundBytesNotAPowerOfTwo", [](AllocatorConfig& c) { c.round_bytes = 1536; }, "round_bytes is 1536 bytes"},
    {"RoundBytesHuge", [](AllocatorConfig& c) { c.round_bytes = std::size_t{1} << 52; },
     "round_bytes is 4503599627370496 bytes"},
    {"SmallSegmentBelowSmallSize", [](AllocatorConfig& c) { c.small_size = 4 * kMiB; },
     "small_segment is 2097152 bytes; it must be at least small_size (4194304 bytes)"},
    {"SmallSegmentNotAMultiple",
     [](AllocatorConfig& c) {
       c.small_segment = 2 * kMiB + 512;
       c.round_bytes = 1024;
     },
     "small_segment is 2097664 bytes"},
    {"LargeSegmentNotAMultiple", [](AllocatorConfig& c) { c.large_segment = 20 * kMiB + 100; },
     "large_segment is 20971620 bytes"},
    {"LargeSegmentHuge", [](AllocatorConfig& c) { c.large_segment = std::size_t{1} << 60; },
     "large_segment is 1152921504606846976 bytes"},
    {"LargeRoundZero", [](AllocatorConfig& c) { c.large_round = 0; }, "large_round is 0 bytes"},
    {"LargeRoundNotAMultiple", [](AllocatorConfig& c) { c.large_round = 3000; }, "large_round is 3000 bytes"},
    {"LargeRoundHuge", [](AllocatorConfig& c) { c.large_round = SIZE_MAX - 511; }, "large_round is"},
    {"MaxSplitNotOverTheLargeSegment", [](AllocatorConfig& c) { c.max_split_size = 20 * kMiB; },
     "max_split_size is 20971520 bytes"},
    {"MaxSplitNotOverTheSmallSegment",
     [](AllocatorConfig& c) {
       c.large_segment = 0;
       c.max_split_size = 2 * kMiB;
     },
     "max_split_size is 2097152 bytes"},
    {"OversizeSlackZero", [](AllocatorConfig& c) { c.oversize_slack = 0; }, "oversize_slack is 0 bytes"},
    {"OversizeSlackHuge", [](AllocatorConfig& c) { c.oversize_slack = SIZE_MAX; }, "oversize_slack is"},
    {"GarbageCollectionNegative", [](AllocatorConfig& c) { c.garbage_collection_threshold = -0.25; },
     "garbage_collection_threshold is -0.25"},
    {"GarbageCollectionOne", [](AllocatorConfig& c) { c.garbage_collection_threshold = 1.0; },
     "garbage_collection_threshold is 1;"},
    {"GarbageCollectionNaN", [](AllocatorConfig& c) { c.garbage_collection_threshold = std::nan(""); },
     "garbage_collection_threshold is nan"},
    {"HistoryTooLong", [](AllocatorConfig& c) { c.history_capacity = (std::size_t{1} << 28) + 1; },
     "history_capacity is 268435457"},
};

INSTANTIATE_TEST_SUITE_P(AllocatorConfigValidation, EveryRule, ::testing::ValuesIn(kBrokenFields),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(AllocatorConfigValidation, AcceptsTheEdgesOfEveryRule) {
  AllocatorConfig c;
  c.round_bytes = 512;
  c.small_size = 0;
  c.small_segment = 0;  // no request is small: all come from the large pool
  c.large_segment = 0;  // every large segment is the request rounded up
  c.large_round = 512;
  c.max_split_size = 512 + 1;
  c.oversize_slack = 1;
  c.garbage_collection_threshold = 0.999;
  c.history_capacity = std::size_t{1} << 10;
  EXPECT_EQ(construction_error(c), "");
  EXPECT_EQ(construction_error(AllocatorConfig::gpumem_defaults()), "");
  EXPECT_EQ(construction_error(AllocatorConfig::pytorch_defaults()), "");
}

}  // namespace
}  // namespace gpumem::alloc
