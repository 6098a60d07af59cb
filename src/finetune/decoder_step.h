#pragma once
// A decoder-only language model's forward as PyTorch's eager kernels run it
// under Hugging Face's modeling code, as a step graph for the simulation of
// training_step.cpp: one value per tensor PyTorch allocates (views share
// their base's storage), one op per kernel, named by module path
// ("/model/layers.3/self_attn/q_proj/linear") so that per-layer
// checkpointing finds each layer's ops.
#include <string>
#include <vector>

#include "gpumem/finetune/finetune.h"
#include "gpumem/llm/llm_model.h"
#include "gpumem/train/step_graph.h"

namespace gpumem::finetune {

struct DecoderStep {
  train::StepGraph graph;
  std::vector<std::string> layer_modules;  // "model.layers.0", ... for --checkpoint layers
  uint64_t frozen_weight_bytes = 0, trainable_weight_bytes = 0;
  uint64_t trainable_parameters = 0, total_parameters = 0;
};

// InputError naming the field for what cannot be built (see finetune.h).
DecoderStep decoder_step(const llm::LlmModel& model, const FinetuneOptions& options);

}  // namespace gpumem::finetune
