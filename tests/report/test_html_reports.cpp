// HTML reports: the envelope that keeps them small, the pages' structure,
// and each page loaded in a real browser (headless Chromium), which must run
// its script without an error, request nothing, and show what it should.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <string>

#include "gpumem/alloc/policies/policy_registry.h"
#include "gpumem/common/envelope.h"
#include "gpumem/llm/llm_fit.h"
#include "gpumem/llm/vllm_sizing.h"
#include "gpumem/oom/oom_message.h"
#include "gpumem/report/html/charts.h"
#include "gpumem/report/html/command_pages.h"
#include "gpumem/report/html/document.h"
#include "gpumem/report/html/model_page.h"
#include "gpumem/report/html/trace_page.h"
#include "gpumem/report/html/train_page.h"
#include "gpumem/trace/replay.h"
#include "gpumem/train/training_step.h"
#include "report/browser.h"
#include "test_paths.h"

namespace gpumem::test {
namespace {

TEST(Envelope, EachColumnHoldsTheLowestAndHighestOfItsPoints) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 50; ++round) {
    const std::int64_t n = 1 + static_cast<std::int64_t>(rng() % 5000);
    const std::size_t columns = 1 + rng() % 300;
    Envelope e(0, n, columns);
    std::vector<std::int64_t> y(static_cast<std::size_t>(n));
    for (std::int64_t x = 0; x < n; ++x) {
      y[static_cast<std::size_t>(x)] = static_cast<std::int64_t>(rng() % 1000) - 500;
      e.add(x, y[static_cast<std::size_t>(x)]);
    }
    const auto cols = e.filled();
    ASSERT_EQ(cols.size(), std::min<std::size_t>(columns, static_cast<std::size_t>(n)));
    for (std::size_t c = 0; c < cols.size(); ++c) {
      const std::int64_t from = e.column_begin(c), to = c + 1 < cols.size() ? e.column_begin(c + 1) : n;
      ASSERT_LT(from, to) << "every column holds at least one x when there are no more columns than x";
      const auto [lo, hi] = std::minmax_element(y.begin() + from, y.begin() + to);
      // The carried value from the column before joins a column's band.
      const std::int64_t carried = c == 0 ? 0 : y[static_cast<std::size_t>(from - 1)];
      EXPECT_EQ(cols[c].low, std::min(*lo, carried)) << "column " << c;
      EXPECT_EQ(cols[c].high, std::max(*hi, carried)) << "column " << c;
      EXPECT_EQ(cols[c].last, y[static_cast<std::size_t>(to - 1)]);
    }
  }
}

TEST(Envelope, EmptyColumnsCarryTheValueBefore) {
  Envelope e(0, 1000, 10);
  e.add(5, 40);
  e.add(950, 7);
  const auto cols = e.filled(3);
  EXPECT_EQ(cols[0].low, 3);
  EXPECT_EQ(cols[0].high, 40);
  for (std::size_t c = 1; c < 9; ++c) EXPECT_EQ(cols[c].low, 40) << c;
  EXPECT_EQ(cols[9].low, 7);
  EXPECT_EQ(cols[9].high, 40);
}

// Issue 46: the replay page's "runs out of memory" labels wrote over one
// another when policies ran out at nearby events. Each label now takes the
// first row it clears, on either side of its line.
TEST(HtmlDocument, MarkerLabelsDoNotOverlap) {
  report::html::LineChart chart;
  chart.id = "markers";
  chart.title = "markers";
  report::html::Series line;
  line.name = "allocated";
  for (int x = 0; x <= 1000; x += 10) {
    line.x.push_back(x);
    line.high.push_back(x);
  }
  line.low = line.high;
  chart.series.push_back(line);
  for (double x : {300.0, 300.0, 310.0, 320.0, 420.0, 990.0})
    chart.markers.push_back({x, "pytorch-expandable runs out of memory"});
  report::html::Document doc("markers");
  doc.line_chart(chart);
  const std::string page = doc.html();
  const std::regex label(
      R"re(<g class="marker"><line x1="([0-9.]+)"[^>]*/><text x="([0-9.]+)" y="([0-9.]+)"( text-anchor="end")?>([^<]*)</text>)re");
  struct Span {
    double left, right, y;
  };
  std::vector<Span> spans;
  for (auto it = std::sregex_iterator(page.begin(), page.end(), label); it != std::sregex_iterator(); ++it) {
    const double x = std::stod((*it)[2]);
    const double width = 6.2 * static_cast<double>((*it)[5].length());
    const bool end = (*it)[4].matched;
    spans.push_back({end ? x - width : x, end ? x : x + width, std::stod((*it)[3])});
    EXPECT_LE(spans.back().right, 720.5) << "a label runs into the legend";
  }
  ASSERT_EQ(spans.size(), 6u);
  for (size_t i = 0; i < spans.size(); ++i) {
    for (size_t j = i + 1; j < spans.size(); ++j) {
      const bool same_row = spans[i].y == spans[j].y;
      const bool apart = spans[i].right <= spans[j].left || spans[j].right <= spans[i].left;
      EXPECT_TRUE(!same_row || apart) << i << " and " << j << " overlap at y " << spans[i].y;
    }
  }
}

TEST(HtmlDocument, EscapesAndForbidsEveryRequest) {
  report::html::Document doc("a <b> & \"c\"");
  doc.paragraph("<script>alert(1)</script>");
  const std::string page = doc.html();
  EXPECT_EQ(page.find("<script>alert"), std::string::npos);
  EXPECT_NE(page.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(page.find("Content-Security-Policy\" content=\"default-src 'none'"), std::string::npos);
  EXPECT_EQ(page.find("://"), std::string::npos) << "no address of anything to load";
}

std::string write_page(const std::string& name, const std::string& html) {
  const std::string path = testing::TempDir() + std::to_string(getpid()) + "_" + name + ".html";
  std::ofstream(path, std::ios::binary) << html;
  return path;
}

// Where the screenshots go: beside the test's other files (the README's
// come from tools/report_screenshots.sh, on the same pages).
std::string screenshot_path(const std::string& name) {
  return testing::TempDir() + std::to_string(getpid()) + "_" + name + ".png";
}

// The browser ran the page's script to its end, saw no error and blocked
// no request.
void expect_clean(const BrowserRun& run, const std::string& what) {
  EXPECT_NE(run.dom.find("data-gpumem-ready=\"1\""), std::string::npos) << what << ": the script did not finish";
  EXPECT_NE(run.dom.find("<div id=\"gpumem-errors\" role=\"alert\" hidden=\"\"></div>"), std::string::npos)
      << what << ": the page reported errors";
  for (const std::string& line : run.console) ADD_FAILURE() << what << ": console: " << line;
}

class HtmlInBrowser : public testing::Test {
 protected:
  void SetUp() override {
    if (!have_chromium()) GTEST_SKIP() << "chromium is not installed (scripts/install-deps.sh installs it)";
  }
};

TEST_F(HtmlInBrowser, ABrokenPageIsCaught) {
  // The harness itself: a script error and a request for an image on the
  // network must both be seen, or the tests below prove nothing.
  report::html::Document doc("broken");
  std::string page = doc.html();
  page.insert(page.find("</body>"), "<img src=\"http://example.invalid/x.png\"><script>undefinedFunction();</script>");
  const BrowserRun run = load_page(write_page("broken", page));
  EXPECT_NE(run.dom.find("blocked: http://example.invalid/x.png"), std::string::npos) << run.dom;
  EXPECT_NE(run.dom.find("undefinedFunction is not defined"), std::string::npos);
  EXPECT_FALSE(run.console.empty()) << "Chromium reports the uncaught error on its console";
}

TEST_F(HtmlInBrowser, ModelPageDrawsOneRectanglePerPlannedBuffer) {
  const std::string model = model_path("mobilenet_v2").string();
  const InspectResult inspected = inspect_model(model);
  infer::PlanRequest request;
  request.solve.time_limit_seconds = 1;
  const infer::PlanReport plan = infer::plan_file(model, request);
  const BrowserRun run = load_page(write_page("model", report::model_html(inspected, &plan)), screenshot_path("model"));
  expect_clean(run, "model page");
  EXPECT_EQ(count(run.dom, "<rect class=\"buffer "), plan.problem.buffers.size());
  EXPECT_EQ(count(run.dom, "data-series=\"live activations\""), 1u);
  EXPECT_NE(run.dom.find("peak: 9.19 MiB"), std::string::npos);
}

// Issue 46's new pages (llm, vLLM, explain-oom) load clean, and say what
// their text says first: the verdict or the diagnosis.
TEST_F(HtmlInBrowser, TheNewPagesLoadCleanWithTheirVerdict) {
  const std::string config = (gpumem::test::source_dir() / "examples" / "llm" / "llama-3-8b").string();
  llm::LlmRequest request;
  request.gpu_bytes = 12ull << 30;
  const llm::LlmPlan plan = llm::plan_llm(llm::load_llm_model(config), request);
  BrowserRun run = load_page(write_page("llm", report::llm_html(plan)), screenshot_path("llm"));
  expect_clean(run, "llm page");
  EXPECT_NE(run.dom.find("DOES NOT FIT a GPU of 12.00 GiB"), std::string::npos);

  llm::VllmRequest v;
  v.gpu_bytes = 16ull << 30;
  const llm::LlmModel model = llm::load_llm_model(config);
  const llm::EngineRules rules = llm::engine_rules("vllm");
  const llm::VllmSizing sizing = llm::size_vllm(model, v, rules);
  run = load_page(write_page("vllm", report::vllm_html(model, sizing, llm::vllm_quant_levels(model, v, rules))),
                  screenshot_path("vllm"));
  expect_clean(run, "vllm page");
  EXPECT_NE(run.dom.find("DOES NOT FIT a GPU of 16.00 GiB"), std::string::npos);
  EXPECT_NE(run.dom.find("awq"), std::string::npos);

  const auto message = oom::parse_oom_message(
      "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 14.76 GiB total capacity; 14.56 GiB already "
      "allocated; 3.44 MiB free; 14.72 GiB reserved in total by PyTorch)");
  ASSERT_TRUE(message.has_value());
  run = load_page(write_page("oom", report::oom_html(oom::explain_oom(*message))), screenshot_path("oom"));
  expect_clean(run, "explain-oom page");
  EXPECT_NE(run.dom.find("Diagnosis: simply full"), std::string::npos);
}

TEST_F(HtmlInBrowser, TracePageDrawsOneLinePerPolicy) {
  const trace::Trace t = trace::read_trace(trace_path("resnet18_adamw_3iter.json.gz"));
  const trace::Lifetimes lifetimes = trace::extract_lifetimes(t, trace::busiest_device(t), false);
  const trace::TraceStats stats = trace::trace_stats(t, lifetimes);
  trace::ReplayOptions options;
  options.timeline_columns = report::html::kHtmlColumns;
  options.optimal_time_limit = 2;
  const trace::ReplayReport replay = trace::replay(t, options);
  const BrowserRun run =
      load_page(write_page("trace", report::trace_html(t, &stats, &replay)), screenshot_path("trace"));
  expect_clean(run, "trace page");
  for (const std::string& policy : alloc::policy_names(&alloc::PolicyEntry::replayed_by_default)) {
    EXPECT_EQ(count(run.dom, "data-series=\"" + policy + " reserved\""), 1u) << policy;
  }
  EXPECT_EQ(count(run.dom, "data-series=\"allocated\""), 1u);
  EXPECT_EQ(count(run.dom, "data-series=\"optimal arena\""), 1u);
  // The arena draws the largest buffers one by one and says how many.
  EXPECT_EQ(count(run.dom, "<rect class=\"buffer "),
            std::min(lifetimes.allocations.size(), report::html::kHtmlMaxRects));
  EXPECT_NE(run.dom.find("The 2,000 largest of 4,413 buffers"), std::string::npos);
  EXPECT_NE(run.dom.find("<h2>What was never freed</h2>"), std::string::npos);
}

TEST_F(HtmlInBrowser, TrainingPageStacksEveryCategory) {
  train::TrainOptions options;
  const train::TrainingStep step =
      train::predict_training_step((source_dir() / "tests/data/train/gpt_adam.onnx").string(), options);
  const BrowserRun run = load_page(write_page("train", report::train_html(step, report::train_summary(step, {}))),
                                   screenshot_path("train"));
  expect_clean(run, "training page");
  EXPECT_EQ(count(run.dom, "<path class=\"area "), static_cast<std::size_t>(train::kCategories));
  EXPECT_NE(run.dom.find(">backward</text>"), std::string::npos);
}

}  // namespace
}  // namespace gpumem::test

namespace gpumem::test {
namespace {

TEST(HtmlPages, CheckpointedModulesShowWhereBackwardRecomputes) {
  train::TrainOptions options;
  options.checkpoint = {"layer2", "layer3"};
  const train::TrainingStep step =
      train::predict_training_step((source_dir() / "tests/data/train/resnet18_sgd.onnx").string(), options);
  const std::string page = report::train_html(step, report::train_summary(step, {}));
  EXPECT_EQ(count(page, "<rect class=\"highlight\""), 2u) << "one band per recomputed module";
  const train::TrainingStep plain =
      train::predict_training_step((source_dir() / "tests/data/train/resnet18_sgd.onnx").string(), {});
  EXPECT_EQ(count(report::train_html(plain, report::train_summary(plain, {})), "<rect class=\"highlight\""), 0u)
      << "without checkpointing, nothing is recomputed";
}

TEST(HtmlPages, InPlaceBuffersAreColouredApart) {
  const std::string model = model_path("mobilenet_v2").string();
  infer::PlanRequest request;
  request.solve.time_limit_seconds = 1;
  const infer::PlanReport plan = infer::plan_file(model, request);
  const std::string page = report::plan_html(plan);
  std::size_t shared = 0;
  for (const std::string& d : plan.buffer_details) shared += d.find("; then in place: ") != std::string::npos;
  ASSERT_GT(shared, 0u);
  EXPECT_EQ(count(page, "<rect class=\"buffer c1\""), shared);
  EXPECT_EQ(count(page, "<rect class=\"buffer c0\""), plan.problem.buffers.size() - shared);
}

}  // namespace
}  // namespace gpumem::test
