#pragma once
// Dynamic batching for non-LLM models (issue 14): Triton's dynamic batcher
// (a maximum queue delay and preferred batch sizes), except that the largest
// batch is not a fixed count but the largest batch whose predicted memory
// fits the device budget.
//
// The memory comes from `gpumem inspect`'s accounting: inference_need
// (resident weights + the activations' peak, in-place reuse allowed, + the
// overhead the caller gives) at each batch size, the model's shapes inferred
// again with the first dimension of every graph input bound to that batch
// size, as `--batch N` does. Figures are never scaled from batch 1.
//
// The batching rules follow Triton's model configuration (ModelDynamicBatching:
// max_queue_delay_microseconds, preferred_batch_size) and its user guide's
// "Dynamic Batcher" section,
// https://docs.nvidia.com/deeplearning/triton-inference-server/user-guide/docs/batcher.html:
// requests join a batch in arrival order; when a batch of a preferred size can
// be formed, the largest such batch is sent at once; otherwise requests wait,
// at most max_queue_delay, for more to arrive. See docs/serve.md.
#include <cstdint>
#include <deque>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "gpumem/infer/inference_need.h"
#include "gpumem/model/inspect.h"

namespace gpumem::infer {

struct BatchMemoryOptions {
  int64_t max_batch = 1;  // the table covers batch sizes 1..max_batch
  // --dim bindings and --dtype pricing, as `gpumem inspect` takes them;
  // `inspect.load.batch` is replaced by each batch size.
  InspectOptions inspect;
  uint64_t overhead_bytes = 0;  // the runtime's own memory (--overhead), added to every row
};

// What one inference of an ONNX model needs at each batch size 1..max_batch.
class BatchMemoryTable {
 public:
  // Loads the model once per batch size. Throws InputError naming the model
  // when it does not load, max_batch < 1, or some size stays unknown at a
  // batch size (a dimension left symbolic: bind it with options.inspect.load.dims),
  // since a lower bound cannot cap a batch.
  static BatchMemoryTable build(const std::filesystem::path& model, const BatchMemoryOptions& options);
  // From figures computed elsewhere (tests, a cache): needs[i] is batch i + 1.
  BatchMemoryTable(std::string model, std::vector<InferenceNeed> needs);

  const std::string& model() const { return model_; }
  int64_t max_batch() const { return static_cast<int64_t>(needs_.size()); }
  const InferenceNeed& need(int64_t batch) const;  // 1..max_batch, else std::out_of_range
  uint64_t bytes(int64_t batch) const { return need(batch).at_least(); }
  // The largest batch size whose need is at most budget_bytes; 0 when not
  // even batch 1 fits.
  int64_t largest_fitting(uint64_t budget_bytes) const;
  // The same, but throws InputError naming the model and both figures when
  // batch 1 does not fit.
  int64_t cap(uint64_t budget_bytes) const;

 private:
  std::string model_;
  std::vector<InferenceNeed> needs_;
};

struct DynamicBatcherConfig {
  // Triton's max_batch_size; 0: the table's max_batch. At most the table's
  // max_batch: the batcher does not guess the memory of larger batches.
  int64_t max_batch_size = 0;
  // Triton's preferred_batch_size: sizes sent as soon as they can be formed.
  // Each in 1..max_batch_size; sizes above the memory cap can never be formed
  // and are dropped (preferred_batch_sizes() lists those kept).
  std::vector<int64_t> preferred_batch_sizes;
  // Triton's max_queue_delay_microseconds: how long the oldest request may
  // wait for a fuller batch.
  int64_t max_queue_delay_us = 0;
  uint64_t memory_budget_bytes = 0;  // device memory for one inference
};

struct BatchRequest {
  uint64_t id = 0;
  int64_t arrival_us = 0;
};

enum class BatchReason {
  kPreferred,  // the queue held a preferred size: the largest one went at once
  kFull,       // the queue reached the cap: waiting could not make it larger
  kDelay,      // the oldest request had waited max_queue_delay: what was queued went
};
const char* batch_reason_name(BatchReason r);  // "preferred", "full", "delay"

struct Batch {
  std::vector<uint64_t> request_ids;  // in arrival order
  BatchReason reason = BatchReason::kDelay;
  uint64_t predicted_bytes = 0;  // the table's need at this batch size
  int64_t size() const { return static_cast<int64_t>(request_ids.size()); }
};

// A pure state machine, like the serving schedulers: the caller owns the clock.
class DynamicBatcher {
 public:
  // Throws InputError (naming the model) when batch 1 does not fit the budget,
  // max_batch_size is negative or beyond the table, a preferred size is
  // outside 1..max_batch_size, or the delay is negative.
  DynamicBatcher(const BatchMemoryTable& table, DynamicBatcherConfig config);

  // Requests arrive in order (equal times are fine); an earlier arrival than
  // the last one throws InputError.
  void add(const BatchRequest& request);

  // The next batch to run at time now_us, or nullopt to keep waiting. Rules,
  // in order, with `cap` = min(max_batch_size, largest batch within budget):
  //  1. the queue holds a preferred size <= cap: the largest such size goes;
  //  2. the queue holds cap requests or more: cap go;
  //  3. the oldest request has waited max_queue_delay (now_us - arrival >=
  //     delay): every queued request goes (fewer than cap by now);
  //  4. otherwise nothing.
  // Batches take the oldest requests first; the rest keep their order.
  std::optional<Batch> next_batch(int64_t now_us);

  // When rule 3 will release the oldest request, if nothing else does first;
  // nullopt when the queue is empty.
  std::optional<int64_t> deadline_us() const;

  int64_t cap() const { return cap_; }
  int64_t max_batch_size() const { return max_batch_size_; }
  const std::vector<int64_t>& preferred_batch_sizes() const { return preferred_; }  // ascending, <= cap
  size_t queued() const { return queue_.size(); }

 private:
  Batch take(int64_t n, BatchReason reason);

  std::string model_;            // for messages
  std::vector<uint64_t> bytes_;  // bytes_[b - 1]: the table's need at batch b, up to cap
  std::vector<int64_t> preferred_;
  int64_t max_batch_size_ = 0;
  int64_t cap_ = 0;
  int64_t delay_us_ = 0;
  std::deque<BatchRequest> queue_;
};

}  // namespace gpumem::infer
