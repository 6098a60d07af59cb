#include "gpumem/infer/dynamic_batcher.h"
#include "gpumem/common/flag_names.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/common/units.h"

namespace gpumem::infer {

BatchMemoryTable BatchMemoryTable::build(const std::filesystem::path& model, const BatchMemoryOptions& options) {
  const std::string name = model.string();
  if (options.max_batch < 1) {
    throw InputError(fmt::format("{}: the largest batch size must be at least 1, not {}", name, options.max_batch));
  }
  std::vector<InferenceNeed> needs;
  needs.reserve(static_cast<size_t>(options.max_batch));
  InspectOptions inspect = options.inspect;
  for (int64_t b = 1; b <= options.max_batch; ++b) {
    // Shapes inferred again at this batch size, as `gpumem inspect --batch b`.
    inspect.load.batch = b;
    const InferenceNeed need = inference_need(inspect_model(model, inspect), options.overhead_bytes);
    if (need.sizes_unknown) {
      throw InputError(
          fmt::format("{}: at batch {} some tensor sizes are unknown, so its memory is only a lower bound "
                      "(bind symbolic dimensions with " GPUMEM_FLAG_DIM ")",
                      name, b));
    }
    needs.push_back(need);
  }
  return BatchMemoryTable(name, std::move(needs));
}

BatchMemoryTable::BatchMemoryTable(std::string model, std::vector<InferenceNeed> needs)
    : model_(std::move(model)), needs_(std::move(needs)) {}

const InferenceNeed& BatchMemoryTable::need(int64_t batch) const {
  if (batch < 1 || batch > max_batch()) {
    throw std::out_of_range(fmt::format("batch {} outside the table's 1..{}", batch, max_batch()));
  }
  return needs_[static_cast<size_t>(batch - 1)];
}

int64_t BatchMemoryTable::largest_fitting(uint64_t budget_bytes) const {
  // Needs grow with the batch on every model we know, but nothing forces
  // them to: the answer is the largest batch whose own need fits.
  for (int64_t b = max_batch(); b >= 1; --b) {
    if (bytes(b) <= budget_bytes) return b;
  }
  return 0;
}

int64_t BatchMemoryTable::cap(uint64_t budget_bytes) const {
  const int64_t b = largest_fitting(budget_bytes);
  if (b == 0) {
    throw InputError(
        fmt::format("{}: one inference at batch 1 needs {} ({} bytes), more than the budget of {} ({} bytes)", model_,
                    format_bytes(needs_.empty() ? 0 : bytes(1)), needs_.empty() ? 0 : bytes(1),
                    format_bytes(budget_bytes), budget_bytes));
  }
  return b;
}

const char* batch_reason_name(BatchReason r) {
  switch (r) {
    case BatchReason::kPreferred: return "preferred";
    case BatchReason::kFull: return "full";
    case BatchReason::kDelay: return "delay";
  }
  return "?";
}

DynamicBatcher::DynamicBatcher(const BatchMemoryTable& table, DynamicBatcherConfig config)
    : model_(table.model()), delay_us_(config.max_queue_delay_us) {
  if (table.max_batch() < 1) throw InputError(fmt::format("{}: the memory table is empty", model_));
  if (config.max_batch_size < 0 || config.max_batch_size > table.max_batch()) {
    throw InputError(fmt::format("{}: max_batch_size {} is outside 0..{} (the batch sizes whose memory is known)",
                                 model_, config.max_batch_size, table.max_batch()));
  }
  if (config.max_queue_delay_us < 0) {
    throw InputError(fmt::format("{}: max_queue_delay {} us is negative", model_, config.max_queue_delay_us));
  }
  max_batch_size_ = config.max_batch_size == 0 ? table.max_batch() : config.max_batch_size;
  for (const int64_t p : config.preferred_batch_sizes) {
    if (p < 1 || p > max_batch_size_) {
      throw InputError(
          fmt::format("{}: preferred batch size {} is outside 1..{} (max_batch_size)", model_, p, max_batch_size_));
    }
  }
  // Memory decides the largest batch: the budget caps max_batch_size.
  cap_ = std::min(max_batch_size_, table.cap(config.memory_budget_bytes));
  for (const int64_t p : config.preferred_batch_sizes) {
    if (p <= cap_) preferred_.push_back(p);
  }
  std::sort(preferred_.begin(), preferred_.end());
  preferred_.erase(std::unique(preferred_.begin(), preferred_.end()), preferred_.end());
  for (int64_t b = 1; b <= cap_; ++b) bytes_.push_back(table.bytes(b));
}

void DynamicBatcher::add(const BatchRequest& request) {
  if (!queue_.empty() && request.arrival_us < queue_.back().arrival_us) {
    throw InputError(fmt::format("{}: request {} arrives at {} us, before the previous request's {} us", model_,
                                 request.id, request.arrival_us, queue_.back().arrival_us));
  }
  queue_.push_back(request);
}

Batch DynamicBatcher::take(int64_t n, BatchReason reason) {
  Batch batch;
  batch.reason = reason;
  batch.predicted_bytes = bytes_[static_cast<size_t>(n - 1)];
  batch.request_ids.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    batch.request_ids.push_back(queue_.front().id);
    queue_.pop_front();
  }
  return batch;
}

std::optional<Batch> DynamicBatcher::next_batch(int64_t now_us) {
  if (queue_.empty()) return std::nullopt;
  const int64_t queued_now = static_cast<int64_t>(queue_.size());
  const int64_t formable = std::min(queued_now, cap_);
  // 1. The largest preferred size the queue can form.
  for (auto it = preferred_.rbegin(); it != preferred_.rend(); ++it) {
    if (*it <= formable) return take(*it, BatchReason::kPreferred);
  }
  // 2. A full batch: no later arrival could join it.
  if (queued_now >= cap_) return take(cap_, BatchReason::kFull);
  // 3. The oldest request has waited long enough: what is queued goes.
  if (now_us - queue_.front().arrival_us >= delay_us_) return take(formable, BatchReason::kDelay);
  return std::nullopt;
}

std::optional<int64_t> DynamicBatcher::deadline_us() const {
  if (queue_.empty()) return std::nullopt;
  return queue_.front().arrival_us + delay_us_;
}

}  // namespace gpumem::infer
