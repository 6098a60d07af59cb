// The generator: its statistics at the fixed seed, its determinism, and the
// bundled example traces as it makes them.
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "gpumem/common/error.h"
#include "gpumem/serve/request_trace.h"
#include "gpumem/serve/trace_generator.h"
#include "test_paths.h"

namespace gpumem::serve {
namespace {

struct Stats {
  double prompt = 0, output = 0, gap = 0, grouped = 0;
};
Stats stats(const std::vector<Request>& r) {
  Stats s;
  for (const Request& q : r) {
    s.prompt += q.prompt_tokens;
    s.output += q.output_tokens;
    s.grouped += q.prefix_group >= 0;
  }
  const double n = static_cast<double>(r.size());
  s.prompt /= n;
  s.output /= n;
  s.grouped /= n;
  s.gap = (r.back().arrival_s - r.front().arrival_s) / (n - 1);
  return s;
}

TEST(TraceGenerator, ShareGptMeansMatchTheVllmPaper) {
  TraceShape shape = trace_preset("sharegpt");
  shape.requests = 20000;
  const Stats s = stats(generate_trace(shape));
  EXPECT_NEAR(s.prompt, 161.31, 161.31 * 0.05);
  EXPECT_NEAR(s.output, 337.99, 337.99 * 0.05);
  EXPECT_NEAR(s.gap, 1 / shape.rate_per_s, 0.03 / shape.rate_per_s);
}

TEST(TraceGenerator, AlpacaMeansMatchTheVllmPaper) {
  TraceShape shape = trace_preset("alpaca");
  shape.requests = 20000;
  const Stats s = stats(generate_trace(shape));
  EXPECT_NEAR(s.prompt, 19.31, 19.31 * 0.05);
  EXPECT_NEAR(s.output, 58.45, 58.45 * 0.05);
  EXPECT_NEAR(s.gap, 0.1, 0.003);
}

TEST(TraceGenerator, SystemPromptsAreSharedByGroup) {
  TraceShape shape = trace_preset("system-prompt");
  shape.requests = 5000;
  const auto r = generate_trace(shape);
  const Stats s = stats(r);
  EXPECT_NEAR(s.grouped, 0.8, 0.03);
  for (const Request& q : r) {
    if (q.prefix_group < 0) continue;
    EXPECT_LT(q.prefix_group, 4);
    EXPECT_EQ(q.prefix_tokens, 1024u);
    EXPECT_GT(q.prompt_tokens, 1024u);
  }
  EXPECT_NEAR(s.prompt, 161.31 + 0.8 * 1024, 40);
}

TEST(TraceGenerator, BurstsCarryTheirShareOfArrivals) {
  TraceShape shape = trace_preset("bursty");
  shape.requests = 20000;
  const auto r = generate_trace(shape);
  double in_burst = 0;
  for (const Request& q : r) in_burst += std::fmod(q.arrival_s, 60.0) < 10.0;
  // 10 s at 8/s against 50 s at 1/s in every minute: 80 of 130.
  EXPECT_NEAR(in_burst / static_cast<double>(r.size()), 80.0 / 130.0, 0.02);
}

TEST(TraceGenerator, TheSeedDecidesEverything) {
  TraceShape a = trace_preset("sharegpt");
  a.requests = 50;
  TraceShape b = a;
  b.seed = 2;
  EXPECT_EQ(request_trace_csv(generate_trace(a)), request_trace_csv(generate_trace(a)));
  EXPECT_NE(request_trace_csv(generate_trace(a)), request_trace_csv(generate_trace(b)));
  for (const Request& q : generate_trace(a)) EXPECT_LE(q.prompt_tokens + q.output_tokens, a.max_model_len);
}

TEST(TraceGenerator, LengthsAreCutToMaxModelLen) {
  TraceShape s = trace_preset("sharegpt");
  s.max_model_len = 256;
  s.requests = 2000;
  for (const Request& q : generate_trace(s)) {
    EXPECT_LE(q.prompt_tokens + q.output_tokens, 256u);
    EXPECT_GE(q.prompt_tokens, 1u);
    EXPECT_GE(q.output_tokens, 1u);
  }
}

TEST(TraceGenerator, UnknownPresetsAreNamed) {
  try {
    trace_preset("chat");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "--generate: unknown preset 'chat' (presets: sharegpt, alpaca, system-prompt, bursty)");
  }
}

// examples/serve/*.csv are `gpumem serve-sim --generate NAME --count N -o ...`
// (docs/serve.md); this says they still are.
TEST(TraceGenerator, TheBundledExamplesAreWhatTheGeneratorMakes) {
  for (const auto& [name, count] : std::vector<std::pair<std::string, uint64_t>>{
           {"sharegpt", 1000}, {"alpaca", 2000}, {"system-prompt", 1000}, {"bursty", 1000}}) {
    TraceShape s = trace_preset(name);
    s.requests = count;
    std::ifstream in(test::source_dir() / "examples" / "serve" / (name + ".csv"), std::ios::binary);
    std::stringstream file;
    file << in.rdbuf();
    EXPECT_EQ(file.str(), request_trace_csv(generate_trace(s))) << name;
  }
}

}  // namespace
}  // namespace gpumem::serve
