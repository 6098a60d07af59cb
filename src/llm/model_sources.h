#pragma once
// What the model loaders share inside src/llm.
#include <string>
#include <vector>

#include "gpumem/llm/llm_model.h"
#include "gpumem/weights/weight_file.h"

namespace gpumem::llm {

// The transformer block a tensor belongs to: the number after "blk." (GGUF)
// or "layers." (Hugging Face); -1 for embeddings, the final norm, the output.
int layer_index(const std::string& name);

// The dtype holding the most bytes.
std::string dominant_dtype(const std::vector<LlmTensor>& tensors);

// Refuses a shape past what any released model has, so that no size
// computed from it can overflow: InputError "WHERE: KEY is N, more than
// LIMIT gpumem accepts" (or a grouping of heads that is not one).
void check_shape(const LlmModel& m, const std::string& where);

// The shape from a GGUF file's llama.cpp key-values ("ARCH.block_count",
// "ARCH.attention.head_count_kv", ...) and its tensors as stored.
LlmModel model_from_gguf(const weights::WeightFile& file);

}  // namespace gpumem::llm
