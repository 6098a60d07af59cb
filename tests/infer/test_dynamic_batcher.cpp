// The dynamic batcher for non-LLM models: its memory table against `gpumem
// inspect`'s own accounting on the bundled models, the budget's cap, Triton's
// batching rules step by step, and the errors.
#include <algorithm>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "gpumem/common/error.h"
#include "gpumem/common/units.h"
#include "gpumem/infer/dynamic_batcher.h"
#include "gpumem/infer/inference_need.h"
#include "gpumem/model/inspect.h"
#include "test_errors.h"
#include "test_paths.h"

namespace gpumem::infer {
namespace {

using test::error_of;
using test::model_path;

BatchMemoryTable real_table(const std::string& name, int64_t max_batch) {
  BatchMemoryOptions options;
  options.max_batch = max_batch;
  return BatchMemoryTable::build(model_path(name), options);
}

// 100 bytes of weights + 10 bytes of activations per request: batch b needs
// 100 + 10 b.
BatchMemoryTable synthetic_table(int64_t max_batch) {
  std::vector<infer::InferenceNeed> needs;
  for (int64_t b = 1; b <= max_batch; ++b) {
    infer::InferenceNeed n;
    n.weight_bytes = 100;
    n.activation_bytes = n.activation_arena_bytes = static_cast<uint64_t>(10 * b);
    needs.push_back(n);
  }
  return BatchMemoryTable("synthetic.onnx", needs);
}

std::vector<uint64_t> ids(std::initializer_list<uint64_t> l) { return l; }

// --- The memory table -------------------------------------------------------

class BundledModelTable : public ::testing::TestWithParam<const char*> {};

TEST_P(BundledModelTable, GrowsWithTheBatchAndIsInspectsAccountingAtEachBatch) {
  const std::string name = GetParam();
  const BatchMemoryTable table = real_table(name, 8);
  ASSERT_EQ(table.max_batch(), 8);
  EXPECT_EQ(table.model(), model_path(name).string());
  for (int64_t b = 1; b <= 8; ++b) {
    SCOPED_TRACE("batch " + std::to_string(b));
    // What `gpumem inspect MODEL --batch b` leads with ("Inference needs at least").
    InspectOptions options;
    options.load.batch = b;
    const InspectResult inspected = inspect_model(model_path(name), options);
    const infer::InferenceNeed expected = infer::inference_need(inspected);
    const infer::InferenceNeed& got = table.need(b);
    EXPECT_EQ(got.weight_bytes, expected.weight_bytes);
    EXPECT_EQ(got.activation_bytes, expected.activation_bytes);
    EXPECT_EQ(got.activation_arena_bytes, expected.activation_arena_bytes);
    EXPECT_FALSE(got.sizes_unknown);
    EXPECT_EQ(table.bytes(b), expected.at_least());
    // The batch reached the model's inputs.
    const Tensor& input = inspected.model.graph.tensors[static_cast<size_t>(inspected.model.graph.inputs.front())];
    EXPECT_EQ(input.dims->front().value, b);
    if (b > 1) {
      // Weights are resident once; activations grow with every request.
      EXPECT_EQ(got.weight_bytes, table.need(1).weight_bytes);
      EXPECT_GT(got.activation_bytes, table.need(b - 1).activation_bytes);
      EXPECT_GT(table.bytes(b), table.bytes(b - 1));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, BundledModelTable, ::testing::Values("resnet50", "bert_base", "mobilenet_v2"));

TEST(BatchMemoryTable, ResNet50ActivationsScaleWithTheBatchAndWeightsDoNot) {
  // A convolutional network's every activation is per image, so its peak is
  // exactly b times batch 1's: a check that does not go through the code
  // under test. Weights: the exporter's resident fp32 parameters.
  const BatchMemoryTable table = real_table("resnet50", 4);
  const auto one = table.need(1).activation_bytes;
  EXPECT_GT(one, 0u);
  for (int64_t b = 2; b <= 4; ++b) EXPECT_EQ(table.need(b).activation_bytes, static_cast<uint64_t>(b) * one);
  EXPECT_EQ(table.need(1).weight_bytes, table.need(4).weight_bytes);
}

TEST(BatchMemoryTable, ResNet50FiguresOfTheDocs) {
  // `gpumem inspect examples/models/resnet50.onnx --batch B --json`'s
  // inference_bytes, as docs/serve.md's example lists them.
  const BatchMemoryTable table = real_table("resnet50", 32);
  EXPECT_EQ(table.bytes(1), 109'257'120u);
  EXPECT_EQ(table.bytes(8), 159'834'528u);
  EXPECT_EQ(table.bytes(23), 268'214'688u);
  EXPECT_EQ(table.bytes(24), 275'440'032u);
  EXPECT_EQ(table.bytes(32), 333'242'784u);
  EXPECT_EQ(table.need(32).weight_bytes, 102'031'776u);
  // A 256 MiB budget: batch 23 fits, 24 does not.
  EXPECT_EQ(table.cap(256ull << 20), 23);
}

TEST(BatchMemoryTable, BertBaseFiguresOfTheDocs) {
  // docs/inspect.md: batch 1 needs 417.64 MiB, --batch 2 421.01 MiB.
  const BatchMemoryTable table = real_table("bert_base", 8);
  EXPECT_EQ(format_bytes(table.bytes(1)), "417.64 MiB");
  EXPECT_EQ(format_bytes(table.bytes(2)), "421.01 MiB");
}

TEST(BatchMemoryTable, OverheadIsAddedToEveryRow) {
  BatchMemoryOptions options;
  options.max_batch = 3;
  options.overhead_bytes = 1000;
  const BatchMemoryTable with = BatchMemoryTable::build(model_path("mobilenet_v2"), options);
  const BatchMemoryTable without = real_table("mobilenet_v2", 3);
  for (int64_t b = 1; b <= 3; ++b) EXPECT_EQ(with.bytes(b), without.bytes(b) + 1000);
}

TEST(BatchMemoryTable, BudgetBetweenTwoBatchSizesCapsExactlyThere) {
  const BatchMemoryTable table = real_table("bert_base", 8);
  for (int64_t b = 1; b < 8; ++b) {
    SCOPED_TRACE("batch " + std::to_string(b));
    EXPECT_EQ(table.largest_fitting(table.bytes(b)), b);          // exactly the need fits
    EXPECT_EQ(table.largest_fitting(table.bytes(b + 1) - 1), b);  // one byte short of the next
    EXPECT_EQ(table.largest_fitting((table.bytes(b) + table.bytes(b + 1)) / 2), b);
    EXPECT_EQ(table.cap(table.bytes(b + 1) - 1), b);
  }
  EXPECT_EQ(table.largest_fitting(table.bytes(8) * 2), 8);  // the table's end
  EXPECT_EQ(table.largest_fitting(table.bytes(1) - 1), 0);
}

TEST(DynamicBatcher, MemoryNotACountDecidesTheBatchOnARealModel) {
  const BatchMemoryTable table = real_table("bert_base", 8);
  DynamicBatcherConfig config;
  config.max_batch_size = 8;
  config.preferred_batch_sizes = {8};
  config.max_queue_delay_us = 1000;
  config.memory_budget_bytes = (table.bytes(5) + table.bytes(6)) / 2;
  DynamicBatcher batcher(table, config);
  EXPECT_EQ(batcher.cap(), 5);
  EXPECT_TRUE(batcher.preferred_batch_sizes().empty());  // 8 never fits
  for (uint64_t i = 0; i < 8; ++i) batcher.add({i, 0});
  const auto batch = batcher.next_batch(0);
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->request_ids, ids({0, 1, 2, 3, 4}));
  EXPECT_EQ(batch->reason, BatchReason::kFull);
  EXPECT_EQ(batch->predicted_bytes, table.bytes(5));
  EXPECT_LE(batch->predicted_bytes, config.memory_budget_bytes);
  EXPECT_FALSE(batcher.next_batch(999));
  const auto rest = batcher.next_batch(1000);
  ASSERT_TRUE(rest);
  EXPECT_EQ(rest->request_ids, ids({5, 6, 7}));
  EXPECT_EQ(rest->reason, BatchReason::kDelay);
  EXPECT_EQ(rest->predicted_bytes, table.bytes(3));
}

TEST(DynamicBatcher, DocExampleResNet50WithA256MiBBudget) {
  // docs/serve.md's example, as written there.
  const BatchMemoryTable table = real_table("resnet50", 32);
  DynamicBatcherConfig c;
  c.max_batch_size = 32;
  c.preferred_batch_sizes = {8, 16, 32};
  c.max_queue_delay_us = 1000;
  c.memory_budget_bytes = 256ull << 20;
  DynamicBatcher preferred(table, c);
  EXPECT_EQ(preferred.cap(), 23);
  EXPECT_EQ(preferred.preferred_batch_sizes(), (std::vector<int64_t>{8, 16}));
  for (uint64_t i = 0; i < 30; ++i) preferred.add({i, 0});
  EXPECT_EQ(preferred.next_batch(0)->size(), 16);

  c.preferred_batch_sizes.clear();
  DynamicBatcher burst(table, c);
  for (uint64_t i = 0; i < 60; ++i) burst.add({i, 0});
  std::vector<int64_t> sizes;
  for (int64_t now : {0, 0, 0, 1000}) {
    if (auto b = burst.next_batch(now)) sizes.push_back(b->size());
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{23, 23, 14}));
}

// --- Triton's rules ---------------------------------------------------------

DynamicBatcherConfig config(std::vector<int64_t> preferred, int64_t delay_us, uint64_t budget) {
  DynamicBatcherConfig c;
  c.preferred_batch_sizes = std::move(preferred);
  c.max_queue_delay_us = delay_us;
  c.memory_budget_bytes = budget;
  return c;
}

TEST(DynamicBatcher, PreferredSizeIsFormedAtOnce) {
  const BatchMemoryTable table = synthetic_table(8);
  DynamicBatcher b(table, config({2, 4}, 1000, 1000));
  EXPECT_EQ(b.cap(), 8);
  b.add({1, 0});
  EXPECT_FALSE(b.next_batch(0));  // one request, no preferred size yet
  b.add({2, 10});
  const auto two = b.next_batch(10);  // long before the delay
  ASSERT_TRUE(two);
  EXPECT_EQ(two->request_ids, ids({1, 2}));
  EXPECT_EQ(two->reason, BatchReason::kPreferred);
  EXPECT_EQ(two->predicted_bytes, 120u);
  EXPECT_EQ(b.queued(), 0u);
}

TEST(DynamicBatcher, TheLargestPreferredSizeTheQueueHoldsGoes) {
  const BatchMemoryTable table = synthetic_table(8);
  DynamicBatcher b(table, config({4, 2}, 1000, 1000));
  for (uint64_t i = 1; i <= 7; ++i) b.add({i, 0});
  const auto first = b.next_batch(0);  // 7 queued: 4, not 2 and not 7
  ASSERT_TRUE(first);
  EXPECT_EQ(first->request_ids, ids({1, 2, 3, 4}));
  EXPECT_EQ(first->reason, BatchReason::kPreferred);
  const auto second = b.next_batch(0);  // 3 left: 2
  ASSERT_TRUE(second);
  EXPECT_EQ(second->request_ids, ids({5, 6}));
  EXPECT_FALSE(b.next_batch(999));  // 1 left waits for the delay
  const auto last = b.next_batch(1000);
  ASSERT_TRUE(last);
  EXPECT_EQ(last->request_ids, ids({7}));
  EXPECT_EQ(last->reason, BatchReason::kDelay);
}

TEST(DynamicBatcher, DelayExpiryReleasesAPartialBatch) {
  const BatchMemoryTable table = synthetic_table(8);
  DynamicBatcher b(table, config({}, 500, 1000));
  EXPECT_FALSE(b.deadline_us());
  b.add({7, 0});
  b.add({8, 100});
  b.add({9, 200});
  EXPECT_EQ(b.deadline_us(), 500);  // the oldest's arrival + the delay
  EXPECT_FALSE(b.next_batch(499));
  const auto batch = b.next_batch(500);
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->request_ids, ids({7, 8, 9}));
  EXPECT_EQ(batch->reason, BatchReason::kDelay);
  EXPECT_EQ(batch->predicted_bytes, 130u);
  EXPECT_FALSE(b.next_batch(10'000));  // empty
}

TEST(DynamicBatcher, ZeroDelaySendsWhatIsQueued) {
  // Triton's default (dynamic_batching { }): no delay, batches as large as possible.
  const BatchMemoryTable table = synthetic_table(8);
  DynamicBatcher b(table, config({}, 0, 1000));
  for (uint64_t i = 0; i < 3; ++i) b.add({i, 5});
  const auto batch = b.next_batch(5);
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->size(), 3);
}

TEST(DynamicBatcher, NeverAboveTheMemoryCapOrMaxBatchSize) {
  const BatchMemoryTable table = synthetic_table(8);
  // Budget 165 bytes: batch 6 needs 160, batch 7 170.
  DynamicBatcher by_memory(table, config({8}, 1000, 165));
  EXPECT_EQ(by_memory.cap(), 6);
  EXPECT_EQ(by_memory.max_batch_size(), 8);
  EXPECT_TRUE(by_memory.preferred_batch_sizes().empty());
  for (uint64_t i = 0; i < 20; ++i) by_memory.add({i, 0});
  std::vector<int64_t> sizes;
  while (auto batch = by_memory.next_batch(1000)) {
    EXPECT_LE(batch->predicted_bytes, 165u);
    sizes.push_back(batch->size());
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{6, 6, 6, 2}));

  // A smaller max_batch_size wins over a roomier budget.
  DynamicBatcherConfig c = config({2}, 1000, 1000);
  c.max_batch_size = 3;
  DynamicBatcher by_count(table, c);
  EXPECT_EQ(by_count.cap(), 3);
  for (uint64_t i = 0; i < 5; ++i) by_count.add({i, 0});
  EXPECT_EQ(by_count.next_batch(0)->size(), 2);  // a preferred size before a full batch, as Triton
  EXPECT_EQ(by_count.next_batch(0)->size(), 2);  // 3 left: still the preferred 2, not the cap
  EXPECT_FALSE(by_count.next_batch(999));        // 1 left waits for the delay
  EXPECT_EQ(by_count.next_batch(1000)->size(), 1);

  // Without preferred sizes a full batch goes at once, however long the delay.
  DynamicBatcherConfig full = config({}, 1'000'000, 1000);
  full.max_batch_size = 3;
  DynamicBatcher at_cap(table, full);
  for (uint64_t i = 0; i < 4; ++i) at_cap.add({i, 0});
  const auto batch = at_cap.next_batch(0);
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->request_ids, ids({0, 1, 2}));
  EXPECT_EQ(batch->reason, BatchReason::kFull);
  EXPECT_FALSE(at_cap.next_batch(0));
}

TEST(DynamicBatcher, KeepsArrivalOrderUnderRandomTraffic) {
  const BatchMemoryTable table = synthetic_table(16);
  std::mt19937 rng(14);
  for (int trial = 0; trial < 50; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const uint64_t budget = 110 + rng() % 200;
    const int64_t delay = static_cast<int64_t>(rng() % 300);
    std::vector<int64_t> preferred;
    for (int64_t p = 1; p <= 16; ++p)
      if (rng() % 4 == 0) preferred.push_back(p);
    DynamicBatcher b(table, config(preferred, delay, budget));
    const int64_t cap = b.cap();
    EXPECT_EQ(cap, std::min<int64_t>(16, static_cast<int64_t>(budget - 100) / 10));
    std::vector<int64_t> arrival;
    std::vector<uint64_t> served;
    int64_t now = 0;
    for (uint64_t id = 0; id < 200; ++id) {
      now += static_cast<int64_t>(rng() % 40);
      b.add({id, now});
      arrival.push_back(now);
      if (rng() % 3 == 0) {
        while (auto batch = b.next_batch(now)) {
          ASSERT_GE(batch->size(), 1);
          ASSERT_LE(batch->size(), cap);
          EXPECT_EQ(batch->predicted_bytes, 100u + 10u * static_cast<uint64_t>(batch->size()));
          const int64_t oldest = arrival[batch->request_ids.front()];
          if (batch->reason == BatchReason::kDelay) {
            EXPECT_GE(now - oldest, delay);
            EXPECT_LT(batch->size(), cap);
          }
          if (batch->reason == BatchReason::kPreferred) {
            EXPECT_TRUE(std::find(preferred.begin(), preferred.end(), batch->size()) != preferred.end());
          }
          if (batch->reason == BatchReason::kFull) EXPECT_EQ(batch->size(), cap);
          served.insert(served.end(), batch->request_ids.begin(), batch->request_ids.end());
        }
      }
    }
    while (b.queued() > 0) {
      auto batch = b.next_batch(*b.deadline_us());
      ASSERT_TRUE(batch);
      served.insert(served.end(), batch->request_ids.begin(), batch->request_ids.end());
    }
    ASSERT_EQ(served.size(), 200u);
    for (uint64_t i = 0; i < served.size(); ++i) ASSERT_EQ(served[i], i);  // first come, first served
  }
}

// --- Bad input --------------------------------------------------------------

TEST(DynamicBatcher, BudgetBelowBatchOnesNeedNamesTheModel) {
  const BatchMemoryTable table = real_table("resnet50", 2);
  const std::string message = error_of([&] { (void)DynamicBatcher(table, config({}, 0, table.bytes(1) - 1)); });
  EXPECT_EQ(message.rfind(model_path("resnet50").string() + ": one inference at batch 1 needs ", 0), 0u) << message;
  EXPECT_NE(message.find("(" + std::to_string(table.bytes(1)) + " bytes), more than the budget of"), std::string::npos)
      << message;
  EXPECT_NE(message.find("(" + std::to_string(table.bytes(1) - 1) + " bytes)"), std::string::npos) << message;
  EXPECT_NE(error_of([&] { table.cap(0); }).find("budget of 0 B (0 bytes)"), std::string::npos);
  EXPECT_EQ(table.largest_fitting(0), 0);
}

TEST(DynamicBatcher, BadConfigurationsAreInputErrors) {
  const BatchMemoryTable table = synthetic_table(4);
  DynamicBatcherConfig c = config({}, 0, 1000);
  c.max_batch_size = 5;  // beyond the table: memory unknown
  EXPECT_NE(error_of([&] { (void)DynamicBatcher(table, c); }).find("synthetic.onnx: max_batch_size 5"),
            std::string::npos);
  c.max_batch_size = -1;
  EXPECT_NE(error_of([&] { (void)DynamicBatcher(table, c); }).find("max_batch_size -1"), std::string::npos);
  EXPECT_NE(error_of([&] { (void)DynamicBatcher(table, config({0}, 0, 1000)); }).find("preferred batch size 0"),
            std::string::npos);
  EXPECT_NE(error_of([&] { (void)DynamicBatcher(table, config({5}, 0, 1000)); }).find("preferred batch size 5"),
            std::string::npos);
  EXPECT_NE(error_of([&] { (void)DynamicBatcher(table, config({}, -1, 1000)); }).find("negative"), std::string::npos);

  DynamicBatcher b(table, config({}, 0, 1000));
  b.add({1, 100});
  EXPECT_NE(error_of([&] { b.add({2, 99}); }).find("request 2 arrives at 99 us"), std::string::npos);
  EXPECT_EQ(b.queued(), 1u);
}

TEST(BatchMemoryTable, SymbolicDimensionsMustBeBound) {
  // token_mlp_dynamic's input is [batch, seq, 256]: the batch is bound per
  // row, seq must be given, or every row would be a lower bound.
  BatchMemoryOptions options;
  options.max_batch = 4;
  const std::string message = error_of([&] { BatchMemoryTable::build(model_path("token_mlp_dynamic"), options); });
  EXPECT_EQ(message.rfind(model_path("token_mlp_dynamic").string() + ": at batch 1 some tensor sizes are unknown", 0),
            0u)
      << message;
  options.inspect.load.dims["seq"] = 16;
  const BatchMemoryTable table = BatchMemoryTable::build(model_path("token_mlp_dynamic"), options);
  for (int64_t b = 2; b <= 4; ++b) EXPECT_GT(table.bytes(b), table.bytes(b - 1));
  InspectOptions at4;
  at4.load.dims["seq"] = 16;
  at4.load.batch = 4;
  EXPECT_EQ(table.bytes(4), infer::inference_need(inspect_model(model_path("token_mlp_dynamic"), at4)).at_least());
}

TEST(BatchMemoryTable, BadModelsAndSizesAreInputErrors) {
  BatchMemoryOptions options;
  options.max_batch = 0;
  EXPECT_NE(error_of([&] { BatchMemoryTable::build(model_path("resnet50"), options); }).find("at least 1"),
            std::string::npos);
  options.max_batch = 2;
  EXPECT_NE(error_of([&] { BatchMemoryTable::build(model_path("no_such_model"), options); }).find("no_such_model"),
            std::string::npos);
  EXPECT_THROW(synthetic_table(2).need(3), std::out_of_range);
  EXPECT_THROW(synthetic_table(2).need(0), std::out_of_range);
}

}  // namespace
}  // namespace gpumem::infer
