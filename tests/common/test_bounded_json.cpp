#include <gtest/gtest.h>

#include <random>
#include <string>

#include "common/bounded_json.h"
#include "gpumem/common/error.h"

namespace gpumem {
namespace {

// A random document whose strings hold brackets, braces, quotes and
// backslashes, so a scan that miscounts inside strings disagrees with the
// parsed document's depth.
std::string random_json(std::mt19937& rng, int budget) {
  const auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  static const char* const kStrings[] = {"\"a\"",    "\"[\"",           "\"{{\"", "\"\\\"[\"",
                                         "\"\\\\\"", "\"]}\\\\\\\"{\"", "\"\""};
  if (budget <= 0 || pick(4) == 0) {
    switch (pick(3)) {
      case 0: return kStrings[pick(7)];
      case 1: return std::to_string(pick(1000));
      default: return "null";
    }
  }
  const bool object = pick(2) == 0;
  std::string out(1, object ? '{' : '[');
  const int n = pick(4);
  for (int i = 0; i < n; ++i) {
    if (i) out += ',';
    if (object) out += std::string(kStrings[pick(7)]).insert(1, std::to_string(i)) + ':';
    out += random_json(rng, budget - 1 - pick(2));
  }
  return out + (object ? '}' : ']');
}

int depth_of(const nlohmann::json& j) {
  if (!j.is_structured()) return 0;
  int deepest = 0;
  for (const auto& child : j) deepest = std::max(deepest, depth_of(child));
  return deepest + 1;
}

TEST(BoundedJson, TheScanAgreesWithTheParsedDepth) {
  std::mt19937 rng(34);
  int refused = 0, accepted = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const std::string text = random_json(rng, 12);
    const nlohmann::json doc = nlohmann::json::parse(text);
    const int depth = depth_of(doc);
    for (const int limit : {1, 3, 6}) {
      if (depth > limit) {
        EXPECT_THROW(parse_bounded_json(text, "doc", true, limit), InputError) << text << " limit " << limit;
        ++refused;
      } else {
        EXPECT_EQ(parse_bounded_json(text, "doc", true, limit), doc) << text << " limit " << limit;
        ++accepted;
      }
    }
  }
  EXPECT_GT(refused, 1000);
  EXPECT_GT(accepted, 1000);
}

TEST(BoundedJson, TheRefusalNamesThePlaceAndTheLimit) {
  const std::string deep = std::string(65, '[') + std::string(65, ']');
  try {
    parse_bounded_json(deep, "config.json");
    FAIL() << "65 levels accepted";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "config.json: JSON nested deeper than 64 levels");
  }
  EXPECT_NO_THROW(parse_bounded_json(std::string(64, '[') + std::string(64, ']'), "config.json"));
}

TEST(BoundedJson, ParseErrorsAreStillNlohmanns) {
  EXPECT_THROW(parse_bounded_json("{\"a\": ]", "x"), nlohmann::json::parse_error);
  EXPECT_TRUE(parse_bounded_json("{\"a\": ]", "x", /*allow_exceptions=*/false).is_discarded());
  // Unbalanced closers do not confuse the scan; the parser reports them.
  EXPECT_THROW(parse_bounded_json("]]]]{}", "x"), nlohmann::json::parse_error);
}

}  // namespace
}  // namespace gpumem
