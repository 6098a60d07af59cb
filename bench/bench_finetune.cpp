// Goals (issue 32): a 70B config answers in under 50 ms; --max-context in under
// 1 s. Llama-3-70B's shape (80 layers, hidden 8192, 64 heads, 8 KV heads,
// ff 28672, vocab 128256), QLoRA r 16 on all seven linear layers, 4,096
// tokens, every layer checkpointed: the step, then the step and its device
// memory (what `gpumem finetune` prints), then --max-context on an 80 GiB GPU.
#include <benchmark/benchmark.h>

#include "gpumem/finetune/finetune_fit.h"
#include "gpumem/llm/llm_model.h"

namespace {

const gpumem::llm::LlmModel& llama_70b() {
  static const gpumem::llm::LlmModel m = gpumem::llm::model_from_hf_config(
      R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8192,
          "intermediate_size": 28672, "num_hidden_layers": 80, "num_attention_heads": 64,
          "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 8192,
          "torch_dtype": "bfloat16", "tie_word_embeddings": false})",
      "llama-3-70b/config.json");
  return m;
}

gpumem::finetune::FinetuneOptions qlora() {
  gpumem::finetune::FinetuneOptions o;
  o.method = gpumem::finetune::FinetuneMethod::kQlora;
  o.seq = 4096;
  o.checkpointing = true;
  return o;
}

void BM_FinetuneStep70B(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(gpumem::finetune::predict_finetune(llama_70b(), qlora()));
}
BENCHMARK(BM_FinetuneStep70B)->Unit(benchmark::kMillisecond);

void BM_FinetuneAnswer70B(benchmark::State& state) {
  for (auto _ : state)
    benchmark::DoNotOptimize(gpumem::finetune::plan_finetune(llama_70b(), qlora(), 80ull << 30, false, false));
}
BENCHMARK(BM_FinetuneAnswer70B)->Unit(benchmark::kMillisecond);

void BM_FinetuneMaxSeq70B(benchmark::State& state) {
  for (auto _ : state)
    benchmark::DoNotOptimize(gpumem::finetune::plan_finetune(llama_70b(), qlora(), 80ull << 30, true, false));
}
BENCHMARK(BM_FinetuneMaxSeq70B)->Unit(benchmark::kMillisecond);

}  // namespace
