#pragma once
// What autograd does with each op, as PyTorch defines it in
// tools/autograd/derivatives.yaml (torch 1.13 and 2.x agree on these): which
// tensors the forward keeps for backward, what else it allocates, and which
// inputs get a newly allocated gradient in backward. One table; each entry
// names its source.
#include <cstdint>
#include <string>
#include <vector>

#include "gpumem/train/step_graph.h"
#include "gpumem/train/training_step.h"

namespace gpumem::train {

// A tensor the forward allocates besides the op's outputs.
struct Extra {
  std::string what;  // "save_mean", "indices", "dropout mask"
  uint64_t bytes = 0;
  bool saved = true;  // kept for backward (else freed when the op ends)
};

struct OpRule {
  bool known = true;              // false: the conservative rule below was used
  std::string source;             // where PyTorch defines it
  bool in_place = false;          // the output takes input 0's storage
  std::vector<int> saved_inputs;  // input positions kept for backward
  bool saved_output = false;      // output 0 is kept for backward
  std::vector<Extra> extras;      // forward allocations besides the outputs
  // Backward: per input position, how its gradient comes to be.
  enum class Grad : std::uint8_t { kNone, kAllocated, kPassThrough };
  std::vector<Grad> grads;        // one per input
  uint64_t backward_scratch = 0;  // freed when the op's backward ends
};

// The rule for `op` in `g` on `device`. `input_dies` says whether input 0
// has no reader after this op (in-place activations need that).
OpRule rule_for(const Op& op, const StepGraph& g, Device device, bool input_dies);

// Elements of a value from its bytes and type.
uint64_t elements_of(const Value& v);

}  // namespace gpumem::train
