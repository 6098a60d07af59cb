#pragma once
// `gpumem finetune`: one fine-tuning step of a decoder-only language model,
// from its architecture (a Hugging Face config.json, folder or GGUF, as
// `gpumem llm` reads them) rather than from an ONNX export. The step graph
// is built at the granularity PyTorch's eager kernels allocate, following
// Hugging Face's modeling code (RMSNorm's fp32 upcast, rotary embeddings,
// eager or fused attention, the gated MLP, the fp32 loss), with LoRA
// adapters, QLoRA's 4-bit base weights and per-layer gradient
// checkpointing, and then runs through the same step simulation as
// `gpumem train` (training_step.h).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpumem/llm/llm_model.h"
#include "gpumem/train/training_step.h"

namespace gpumem::finetune {

enum class FinetuneMethod : std::uint8_t { kFull, kFreeze, kLora, kQlora };
enum class Attention : std::uint8_t { kEager, kSdpa, kFlash };
enum class BaseQuant : std::uint8_t { kNf4, kNf4DoubleQuant, kInt8 };

const char* to_string(FinetuneMethod m);
const char* to_string(Attention a);
const char* to_string(BaseQuant q);

struct FinetuneOptions {
  FinetuneMethod method = FinetuneMethod::kLora;
  uint32_t lora_r = 16;
  double lora_dropout = 0.0;  // peft's default; > 0 keeps a mask per adapted input
  // Which linear layers get adapters, by their Hugging Face short names:
  // q, k, v, o, gate, up, down; head (lm_head) and embed (embed_tokens).
  std::vector<std::string> lora_targets = {"q", "k", "v", "o", "gate", "up", "down"};
  BaseQuant quant = BaseQuant::kNf4;  // QLoRA's frozen base weights
  uint64_t seq = 2048;
  uint64_t micro_batch = 1;
  uint64_t grad_accum = 1;     // micro-batches per optimizer step; memory is one micro-batch's
  bool checkpointing = false;  // every decoder layer under torch.utils.checkpoint (gradient_checkpointing_enable)
  Attention attention = Attention::kSdpa;
  // transformers before 4.46 sliced the logits for the loss and copied them
  // (shift_logits = logits[..., :-1, :].contiguous()); 4.46 on pads the
  // labels instead.
  bool shift_copy = false;
  uint32_t freeze_trainable_layers = 1;  // --method freeze: the last layers trained (with the final norm and head)
  // The step's optimizer, precision, device, allocator and overhead, as
  // `gpumem train` takes them (its loss and checkpoint are set here).
  train::TrainOptions train = [] {
    train::TrainOptions t;
    t.precision = train::Precision::kBf16;
    return t;
  }();
};

// What one step costs and where its peak falls, by what PyTorch allocates.
struct FinetuneStep {
  FinetuneOptions options;
  train::TrainingStep step;             // the simulated step: allocations, peak, breakdown by category
  uint64_t frozen_weight_bytes = 0;     // at their storage type (4-bit for QLoRA)
  uint64_t trainable_weight_bytes = 0;  // parameters the optimizer updates (adapters for LoRA)
  // Live at the peak: the logits, their fp32 copy, the shifted copy and
  // log-softmax, by the category the step put them in.
  uint64_t logits_saved_bytes = 0, logits_transient_bytes = 0;
  uint64_t trainable_parameters = 0;
  uint64_t total_parameters = 0;
};

// The step of `model` under `options`. InputError for what gpumem cannot
// size (multi-head latent attention), LoRA targets the model does not have,
// a sequence past max_position_embeddings, or an empty batch.
FinetuneStep predict_finetune(const llm::LlmModel& model, const FinetuneOptions& options);

}  // namespace gpumem::finetune
