#pragma once
// Floating-point operations of each op's forward pass, from its shapes: what
// recomputing it costs. One table (flops.cpp), by op:
//   convolution        2 x output elements x (input channels / groups) x kernel area
//   linear, MatMul     2 x output elements x inner dimension
//   batch/layer norm   5 x elements (mean, variance, normalise, scale, shift)
//   softmax            5 x elements (max, subtract, exp, sum, divide)
//   gelu               8 x elements (the erf form)
//   pooling            output elements x window, or input elements (global)
//   views, casts       0 and elements (a copy)
//   other elementwise  1 x output elements
#include <cstdint>

#include "gpumem/train/step_graph.h"

namespace gpumem::train {

uint64_t forward_flops(const Op& op, const StepGraph& g);

}  // namespace gpumem::train
