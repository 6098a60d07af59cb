// GPUMEM_ALLOC_CONF parsing: every key, presets, and errors that name the key.
#include <cstdlib>

#include <gtest/gtest.h>

#include "gpumem/alloc/config.h"
#include "gpumem/common/error.h"

namespace gpumem::alloc {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

std::string error_of(std::string_view text) {
  try {
    parse_allocator_config(text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

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

TEST(AllocatorConfig, ErrorsNameTheKey) {
  EXPECT_NE(error_of("max_split_size:128").find("unknown key 'max_split_size'"), std::string::npos);
  EXPECT_NE(error_of("max_split_size_mb:ten").find("key 'max_split_size_mb': bad value 'ten'"), std::string::npos);
  EXPECT_NE(error_of("max_split_size_mb:10").find("more than 20"), std::string::npos);
  EXPECT_NE(error_of("garbage_collection_threshold:1.5").find("garbage_collection_threshold"), std::string::npos);
  EXPECT_NE(error_of("expandable_segments:yes").find("true or false"), std::string::npos);
  EXPECT_NE(error_of("round_bytes:300").find("power of two"), std::string::npos);
  EXPECT_NE(error_of("preset:tensorflow").find("gpumem or pytorch"), std::string::npos);
  EXPECT_NE(error_of("expandable_segments").find("expected key:value"), std::string::npos);
  EXPECT_NE(error_of("small_size_mb:4").find("below small_size_mb"), std::string::npos);
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

}  // namespace
}  // namespace gpumem::alloc
