#pragma once
// What `gpumem finetune` answers around one step: whether it fits a GPU
// (on the device total, as `gpumem fit` decides), the longest sequence and
// the largest micro-batch that do, and the changes that would make a
// setting fit.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpumem/train/device_memory.h"
#include "gpumem/train/finetune.h"

namespace gpumem::train {

// One change to the settings and what the step then takes.
struct FinetuneChange {
  std::string what;  // "--checkpointing layers", "--method qlora", ...
  std::string cost;  // what it costs: recomputation, precision, steps
  uint64_t device_bytes = 0;
  bool fits = false;
};

struct FinetunePlan {
  FinetuneStep step;
  DeviceMemory device;
  uint64_t gpu_bytes = 0;  // 0: no budget given
  bool fits = false;       // with a budget
  std::optional<uint64_t> max_seq, max_micro_batch;
  bool max_seq_capped = false;          // the search stopped at max_position_embeddings
  std::vector<FinetuneChange> changes;  // when it does not fit: single changes, those that fit first
};

// The step, and with `gpu_bytes` the answers. InputError as predict_finetune.
FinetunePlan plan_finetune(const llm::LlmModel& model, const FinetuneOptions& options, uint64_t gpu_bytes,
                           bool find_max_seq, bool find_max_batch);

}  // namespace gpumem::train
