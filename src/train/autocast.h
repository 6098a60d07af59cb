#pragma once
// Automatic mixed precision as torch.autocast applies it: matrix products
// and convolutions run in the low precision on low-precision copies of
// their inputs and weights; a list of ops (layer norm, losses; on CUDA
// also softmax, exp, log, sums) runs in fp32 on fp32 copies; everything
// else computes in the widest type of its inputs. The copies are real
// tensors: autograd keeps the ones backward needs, and their gradients are
// cast back.
#include "gpumem/train/step_graph.h"
#include "gpumem/train/training_step.h"

namespace gpumem::train {

// Rewrites `g` (priced in fp32) for amp-fp16 or amp-bf16: value types and
// sizes, and the cast ops autocast inserts. Other precisions: unchanged.
void apply_autocast(StepGraph& g, Precision precision, Device device);

// Adds a cast of `value` to `to` before op position `at` (or at the end when
// `at` is g.ops.size()) and returns the new value's id.
int insert_cast(StepGraph& g, int value, DType to, size_t at);

}  // namespace gpumem::train
