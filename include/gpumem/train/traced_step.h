#pragma once
// A training step traced by running PyTorch itself: gpumem.torch.estimate
// runs the user's module, loss, backward and optimizer on fake tensors
// (torch 2.x, no compute) and writes every allocation with its size,
// lifetime, operator, module and phase as a "gpumem-step" document
// (docs/train.md, "A traced step"). `gpumem train STEP` reads it: the same
// summary, allocator replay and verdict as a step predicted from a graph.
#include <string>
#include <string_view>

#include "gpumem/train/training_step.h"

namespace gpumem::train {

// Reads PATH (gzip or not). `device` carries what the command line adds
// around the step: the allocator and the overhead; the document's own
// settings (device, optimizer, precision) come from the trace. Throws a
// one-line InputError naming the file and the place on anything malformed:
// sizes and times are checked, never trusted.
TrainingStep load_traced_step(const std::string& path, const TrainOptions& device);
// The same for a document already in memory; `where` names it in errors.
TrainingStep parse_traced_step(std::string_view text, const std::string& where, const TrainOptions& device);

}  // namespace gpumem::train
