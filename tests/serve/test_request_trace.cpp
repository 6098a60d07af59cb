// Request traces: both formats, gzip, and one exact line for each problem.
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "gpumem/common/error.h"
#include "gpumem/common/gzip.h"
#include "gpumem/serve/request_trace.h"
#include "gpumem/serve/trace_generator.h"
#include "test_paths.h"

namespace gpumem::serve {
namespace {

std::string error_of(const std::string& text, uint32_t max_model_len = 0) {
  try {
    parse_request_trace(text, "t.csv", max_model_len);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(RequestTrace, CsvWithAndWithoutGroups) {
  const auto r = parse_request_trace("arrival_s,prompt_tokens,output_tokens\n0,10,20\n0.5, 30 ,40\r\n\n", "t.csv");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[1].id, 1u);
  EXPECT_DOUBLE_EQ(r[1].arrival_s, 0.5);
  EXPECT_EQ(r[1].prompt_tokens, 30u);
  EXPECT_EQ(r[1].output_tokens, 40u);
  EXPECT_EQ(r[1].prefix_group, -1);

  // Without prefix_tokens a group shares its shortest prompt; rows may leave the prefix columns off.
  const auto g = parse_request_trace(
      "arrival_s,prompt_tokens,output_tokens,prefix_group\n0,100,1,0\n1,80,1,0\n2,50,1,\n3,200,1,1\n4,10,1\n", "t.csv");
  EXPECT_EQ(g[0].prefix_group, 0);
  EXPECT_EQ(g[0].prefix_tokens, 80u);
  EXPECT_EQ(g[1].prefix_tokens, 80u);
  EXPECT_EQ(g[2].prefix_group, -1);
  EXPECT_EQ(g[2].prefix_tokens, 0u);
  EXPECT_EQ(g[3].prefix_tokens, 200u);
  EXPECT_EQ(g[4].prefix_group, -1);
}

TEST(RequestTrace, CsvGroupColumnBeforeTheDataRows) {
  const auto g =
      parse_request_trace("arrival_s,prompt_tokens,output_tokens,prefix_group\n0,100,1,0\n1,80,1,0\n", "t.csv");
  EXPECT_EQ(g[0].prefix_tokens, 80u);
  EXPECT_EQ(g[1].prefix_tokens, 80u);
}

TEST(RequestTrace, JsonLinesWithPrefixTokens) {
  const auto r = parse_request_trace(
      "{\"arrival_s\": 0.25, \"prompt_tokens\": 300, \"output_tokens\": 7, \"prefix_group\": 2, \"prefix_tokens\": "
      "128}\n{\"arrival_s\": 1, \"prompt_tokens\": 5, \"output_tokens\": 6}\n",
      "t.jsonl");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].prefix_group, 2);
  EXPECT_EQ(r[0].prefix_tokens, 128u);
  EXPECT_EQ(r[1].prefix_group, -1);
}

TEST(RequestTrace, GzipIsRead) {
  const std::string text = "arrival_s,prompt_tokens,output_tokens\n0,10,20\n";
  const std::string path = testing::TempDir() + "serve_trace_gzip.csv.gz";
  std::ofstream(path, std::ios::binary) << gzip::compress(text);
  EXPECT_EQ(read_request_trace(path).size(), 1u);
}

TEST(RequestTrace, EveryProblemIsOneLineNamingTheLine) {
  const std::string h = "arrival_s,prompt_tokens,output_tokens\n";
  EXPECT_EQ(error_of("time,prompt,output\n"),
            "t.csv: line 1: expected the header arrival_s,prompt_tokens,output_tokens[,prefix_group[,prefix_tokens]] "
            "or a JSON object, got 'time,prompt,output'");
  EXPECT_EQ(error_of(h + "0,ten,5\n"), "t.csv: line 2: prompt_tokens 'ten' is not a whole number");
  EXPECT_EQ(error_of(h + "0,10,-5\n"), "t.csv: line 2: output_tokens '-5' is negative");
  EXPECT_EQ(error_of(h + "-1,10,5\n"), "t.csv: line 2: arrival_s -1 is negative");
  EXPECT_EQ(error_of(h + "x,10,5\n"), "t.csv: line 2: arrival_s 'x' is not a number of seconds");
  EXPECT_EQ(error_of(h + "2,10,5\n1,10,5\n"),
            "t.csv: line 3: arrival_s 1 is before the previous request's 2 (arrivals must be in order)");
  EXPECT_EQ(error_of(h + "0,4000,200\n", 4096),
            "t.csv: line 2: prompt_tokens + output_tokens = 4200 is longer than max_model_len 4096");
  EXPECT_EQ(error_of(h + "0,10\n"), "t.csv: line 2: 2 fields where the header has 3");
  EXPECT_EQ(error_of(h + "0,10,5,1\n"), "t.csv: line 2: 4 fields where the header has 3");
  EXPECT_EQ(error_of(h + "0,0,5\n"), "t.csv: line 2: prompt_tokens is 0 (a request has at least one prompt token)");
  EXPECT_EQ(error_of(h + "0,10,99999999999\n"),
            "t.csv: line 2: output_tokens 99999999999 is too large (at most 4294967295)");
  EXPECT_EQ(error_of(h), "t.csv: no requests");
  EXPECT_EQ(error_of("arrival_s,prompt_tokens,output_tokens,prefix_group,prefix_tokens\n0,10,5,1,11\n"),
            "t.csv: line 2: prefix_tokens 11 is more than prompt_tokens 10");
  EXPECT_EQ(error_of("{\"arrival_s\": 0, \"prompt_tokens\": 1}\n"), "t.csv: line 1: no output_tokens");
  EXPECT_EQ(error_of("{\"arrival_s\": 0, \"prompt_tokens\": 1.5, \"output_tokens\": 1}\n"),
            "t.csv: line 1: prompt_tokens 1.5 is not a whole number");
  EXPECT_EQ(error_of("{\"arrival_s\": 0, \"prompt_tokens\": 1, \"output_tokens\": 1, \"user\": 3}\n"),
            "t.csv: line 1: unknown key 'user' (keys: arrival_s, prompt_tokens, output_tokens, prefix_group, "
            "prefix_tokens)");
  EXPECT_EQ(error_of("{\"arrival_s\": 0, \"prompt_tokens\": 1, \"output_tokens\": 1}\n{oops\n"),
            "t.csv: line 2: not a JSON object (JSON lines: one {\"arrival_s\": ..., \"prompt_tokens\": ..., "
            "\"output_tokens\": ...} per line)");
}

TEST(RequestTrace, MoreRequestsThanTheLimitAreRefused) {
  // The limit is 10,000,000; the same check at 1,000 spares the test 400 MB.
  EXPECT_EQ(kMaxTraceRequests, 10'000'000u);
  std::string text = "arrival_s,prompt_tokens,output_tokens\n";
  for (int i = 0; i < 1000; ++i) text += "0,1,1\n";
  EXPECT_EQ(parse_request_trace(text, "t.csv", 0, 1000).size(), 1000u);
  text += "0,1,1\n";
  try {
    parse_request_trace(text, "t.csv", 0, 1000);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "t.csv: line 1002: more than 1000 requests, the most a trace may hold");
  }
}

TEST(RequestTrace, CsvRoundTripsAGeneratedTrace) {
  TraceShape s = trace_preset("system-prompt");
  s.requests = 300;
  const auto a = generate_trace(s);
  const auto b = parse_request_trace(request_trace_csv(a), "round-trip.csv", s.max_model_len);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].arrival_s, b[i].arrival_s) << i;
    EXPECT_EQ(a[i].prompt_tokens, b[i].prompt_tokens) << i;
    EXPECT_EQ(a[i].output_tokens, b[i].output_tokens) << i;
    EXPECT_EQ(a[i].prefix_group, b[i].prefix_group) << i;
    EXPECT_EQ(a[i].prefix_tokens, b[i].prefix_tokens) << i;
  }
}

TEST(RequestTrace, TheBundledExamplesRead) {
  for (const char* name : {"sharegpt", "alpaca", "system-prompt", "bursty"}) {
    const auto path = (test::source_dir() / "examples" / "serve" / (std::string(name) + ".csv")).string();
    const auto r = read_request_trace(path, 4096);
    EXPECT_GE(r.size(), 100u) << name;
    EXPECT_LE(r.size(), 2000u) << name;
  }
}

}  // namespace
}  // namespace gpumem::serve
