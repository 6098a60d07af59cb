#pragma once
// The flags that describe a training step, shared by `train` and `fit`:
// --optimizer, --precision, --device, --grads, --foreach, --allocator,
// --overhead, with one table of names each.
#include <string>

#include <CLI/CLI.hpp>

#include "gpumem/train/training_step.h"

namespace gpumem::cli {

struct StepFlags {
  std::string optimizer = "adamw";
  std::string precision = "fp32";
  std::string device = "cuda";
  std::string grads = "set-to-none";
  std::string foreach;    // empty: the device's default
  std::string allocator;  // empty: pytorch on cuda, none on cpu
  std::string overhead;   // empty: the per-device default
  std::string torch;      // empty: today's release
};

// `precision_auto`: --precision also takes "auto" (fit).
void add_step_flags(CLI::App& cmd, StepFlags& flags, bool precision_auto = false);

// Sets optimizer, precision ("auto" starts from fp32), device, grads,
// foreach, allocator and overhead.
void apply_step_flags(const StepFlags& flags, train::TrainOptions& options);

// --loss of train and fit: cross-entropy | mse | none over the graph's
// first output (issue 47: fit had none, so it always priced cross-entropy).
void add_loss_flag(CLI::App& cmd, std::string& loss);
train::Loss loss_named(const std::string& name);

// --trace OUT of train and fit: the step as a gpumem history trace, written
// atomically (gzip when OUT ends in .gz).
void write_step_trace(const std::string& path, const train::TrainingStep& step);

}  // namespace gpumem::cli
