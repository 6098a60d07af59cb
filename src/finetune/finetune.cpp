// gpumem finetune: the decoder's step graph (decoder_step.cpp) through the
// step simulation `gpumem train` uses.
#include "gpumem/finetune/finetune.h"

#include "finetune/decoder_step.h"
#include "gpumem/train/step_graph.h"

namespace gpumem::finetune {

const char* to_string(FinetuneMethod m) {
  switch (m) {
    case FinetuneMethod::kFull: return "full";
    case FinetuneMethod::kFreeze: return "freeze";
    case FinetuneMethod::kLora: return "lora";
    case FinetuneMethod::kQlora: return "qlora";
  }
  return "?";
}

const char* to_string(Attention a) {
  switch (a) {
    case Attention::kEager: return "eager";
    case Attention::kSdpa: return "sdpa";
    case Attention::kFlash: return "flash";
  }
  return "?";
}

const char* to_string(BaseQuant q) {
  switch (q) {
    case BaseQuant::kNf4: return "nf4";
    case BaseQuant::kNf4DoubleQuant: return "nf4-dq";
    case BaseQuant::kInt8: return "int8";
  }
  return "?";
}

FinetuneStep predict_finetune(const llm::LlmModel& model, const FinetuneOptions& options) {
  DecoderStep d = decoder_step(model, options);
  train::TrainOptions t = options.train;
  t.loss = train::Loss::kCrossEntropy;
  t.checkpoint.clear();
  if (options.checkpointing) t.checkpoint = d.layer_modules;
  FinetuneStep out;
  out.options = options;
  out.frozen_weight_bytes = d.frozen_weight_bytes;
  out.trainable_weight_bytes = d.trainable_weight_bytes;
  out.trainable_parameters = d.trainable_parameters;
  out.total_parameters = d.total_parameters;
  out.step = train::simulate_step_graph(std::move(d.graph), t, model.source);
  for (const train::Allocation& a : out.step.allocations) {
    const bool live = a.alloc_time <= out.step.peak_time && out.step.peak_time < a.free_time;
    // The head's output and everything the loss made of it (its fp32 copy,
    // log-softmax, their gradients), by the names decoder_step gives them.
    const bool logits = a.tensor.find("/lm_head/") != std::string::npos ||
                        a.tensor.find("/loss/") != std::string::npos ||
                        a.tensor.find("final_logit_softcapping") != std::string::npos;
    if (!live || !logits) continue;
    if (a.category == train::Category::kSavedActivations) out.logits_saved_bytes += a.bytes;
    if (a.category == train::Category::kTransient) out.logits_transient_bytes += a.bytes;
  }
  return out;
}

}  // namespace gpumem::finetune
