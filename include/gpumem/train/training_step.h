#pragma once
// `gpumem train`: the memory of one training step, predicted from the
// model's forward graph (an ONNX export in training mode): the forward pass
// with what autograd keeps for backward, the loss, the backward pass in
// reverse, and the optimizer step. Every byte the step would allocate is an
// allocation with a lifetime, so the prediction is also a trace that
// `gpumem replay` runs under allocator policies.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpumem/alloc/policies/policy_run.h"
#include "gpumem/model/inspect.h"
#include "gpumem/trace/trace.h"

namespace gpumem::train {

// kAdamW32bit: bitsandbytes' 32-bit AdamW (AdamW32bit, PagedAdamW,
// PagedAdamW32bit): torch's fp32 states, one fused kernel per parameter.
enum class Optimizer : std::uint8_t { kSgd, kSgdMomentum, kAdam, kAdamW, kAdafactor, kAdam8bit, kAdamW32bit };
enum class Precision : std::uint8_t { kFp32, kAmpFp16, kAmpBf16, kBf16 };
enum class Loss : std::uint8_t { kCrossEntropy, kMse, kNone };
enum class Device : std::uint8_t { kCuda, kCpu };
enum class Phase : std::uint8_t { kResident, kForward, kLoss, kBackward, kOptimizer };

// A PyTorch release, for the rules where releases differ (each says how).
struct TorchVersion {
  int major = 2, minor = 1;  // the oldest release current rules hold for
  bool before(int maj, int min) const { return major < maj || (major == maj && minor < min); }
  std::string str() const { return std::to_string(major) + "." + std::to_string(minor); }
};
// "1.13", "2", "2.4.1" -> {major, minor}; nullopt when it is not a version
// or is older than 1.13 (the oldest whose rules gpumem has).
std::optional<TorchVersion> parse_torch_version(const std::string& text);

const char* to_string(Optimizer o);
const char* to_string(Precision p);
const char* to_string(Loss l);
const char* to_string(Device d);
const char* to_string(Phase p);

struct TrainOptions {
  InspectOptions model;  // --batch, --dim (pricing is set by `precision`)
  Optimizer optimizer = Optimizer::kAdamW;
  Precision precision = Precision::kFp32;
  Loss loss = Loss::kCrossEntropy;
  std::string frozen;             // ECMAScript regex over parameter names; empty: none frozen
  bool grads_set_to_none = true;  // zero_grad(set_to_none=True), PyTorch 2's default
  bool first_step = false;        // optimizer states are created during this step
  Device device = Device::kCuda;
  // The optimizer's multi-tensor (foreach) implementation; its temporaries
  // span every parameter at once. Default: on for CUDA (PyTorch 2's
  // default), off for CPU (PyTorch's for-loop implementation there).
  std::optional<bool> foreach;
  // --torch: the release to follow where releases differ (1.13 and 2.0
  // keep foreach Adam's denominator as a second list); none: current ones.
  std::optional<TorchVersion> torch;
  // Modules to run under torch.utils.checkpoint ("layer2.1",
  // "encoder.layers.0"): each keeps only its inputs in the forward pass and
  // is recomputed in the backward pass. Module paths come from the node
  // names a PyTorch export writes (module_path()).
  std::vector<std::string> checkpoint;
  // The device around the step (device_memory.h): the caching allocator
  // that holds it ("pytorch" when empty on CUDA; none on CPU) and what the
  // CUDA context and workspaces take (default kDefaultCudaOverheadBytes on
  // CUDA, 0 on CPU). They change no allocation of the step.
  std::string allocator;
  std::optional<uint64_t> overhead_bytes;
};

// The PyTorch module a node of a PyTorch export belongs to, from its name:
// "/layer2/layer2.1/conv1/Conv" -> "layer2.1.conv1",
// "/encoder/layers.0/self_attn/MatMul" -> "encoder.layers.0.self_attn";
// "" for a node outside any module or not named that way.
// With `depth` >= 1, only the first `depth` scopes: the ancestor at that
// depth ("/layer2/layer2.1/conv1/Conv" at depth 1: "layer2").
std::string module_path(const std::string& node_name, int depth = -1);

// What a byte at the peak is.
enum class Category : std::uint8_t {
  kWeights,           // parameters and buffers (BatchNorm running statistics)
  kGradients,         // parameters' gradients, kept until the optimizer step
  kOptimizerStates,   // momentum, Adam's moments...
  kInputs,            // the batch and its labels
  kSavedActivations,  // forward tensors autograd keeps for backward
  kTransient,         // the rest: outputs not kept, activation gradients, scratch
};
const char* to_string(Category c);
inline constexpr int kCategories = 6;

// One allocation of the predicted step. Times are step indices: the
// allocation exists on [alloc_time, free_time) and an op's outputs are
// allocated before its dying inputs are freed.
struct Allocation {
  std::string tensor;  // what it holds: a tensor's name, "grad of X", "exp_avg of W"
  std::string op;      // the op that allocated it
  std::string module;  // the module it ran in ("model.layers.0.mlp"), where known
  Phase phase = Phase::kForward;
  Category category = Category::kTransient;
  uint64_t bytes = 0;
  int alloc_time = 0;
  int free_time = 0;  // > alloc_time; the end of the step for what outlives it
  // Provenance, for forward allocations: the op position that made it, and
  // the forward ops that read it or keep it for backward (planning uses
  // these to tell what checkpointing would free).
  int op_index = -1;
  std::vector<int> read_by, kept_by;
};

struct TimelinePoint {
  int time = 0;
  Phase phase = Phase::kForward;
  std::string op;
  uint64_t live_bytes = 0;
};

struct TrainingStep {
  std::string model;  // the model's path, as given
  // A step traced by running PyTorch itself (traced_step.h): what traced it
  // ("torch 2.15.0, fake tensors") and its settings as the trace states them
  // (the optimizer's class, the precision); none for a step predicted from a
  // graph, whose settings are `options`.
  struct Traced {
    std::string with, optimizer, precision;
  };
  std::optional<Traced> traced;
  TrainOptions options;
  BatchAxis batch_axis;                 // which input axis is the batch, its size and why
  std::vector<Allocation> allocations;  // in allocation order (resident first)
  std::vector<TimelinePoint> timeline;  // one per step time
  int end_time = 0;                     // the step's last time + 1
  uint64_t peak_bytes = 0;
  int peak_time = 0;
  Phase peak_phase = Phase::kForward;
  std::string peak_op;
  uint64_t breakdown[kCategories] = {};  // bytes live at the peak, by category; sums to peak_bytes
  uint64_t steady_state_bytes = 0;       // weights + optimizer states (+ gradients unless set to none)
  uint64_t parameter_bytes = 0;          // trainable and frozen
  uint64_t trainable_parameters = 0;     // elements
  uint64_t frozen_parameters = 0;
  // What the usual estimators count: weights + gradients + optimizer states.
  uint64_t static_estimate_bytes = 0;
  std::vector<std::string> assumptions;  // ops without a rule, with the conservative rule used
  std::vector<std::string> warnings;     // e.g. a graph exported in inference mode
  // Bytes allocated per phase, and the largest live total reached in it.
  uint64_t allocated_in_phase[5] = {};
  uint64_t peak_in_phase[5] = {};
  std::vector<int> recomputed_ops;  // op positions that backward runs again (checkpointing)
  // Per forward op position (the loss's ops last): its node name and FLOPs.
  std::vector<std::string> op_names;
  std::vector<std::string> op_kinds;  // "convolution", "linear", "MatMul"...
  std::vector<uint64_t> op_flops;
  uint64_t forward_flops = 0;    // one forward pass, the loss included
  uint64_t recompute_flops = 0;  // what checkpointing runs again
  // Per time: the forward op it runs (or recomputes, or backpropagates
  // through) as an op position; -1 for resident and optimizer times.
  std::vector<int> op_at_time;
};

// Loads the model and predicts one step. Throws InputError (one line, naming
// the file) on unknown shapes, a graph without an output for the loss, or a
// --frozen that is not a valid regex.
TrainingStep predict_training_step(const std::string& path, const TrainOptions& options);
// The same for a model already loaded (options.model's shapes are then
// those it was loaded with).
TrainingStep predict_training_step(const Model& model, const TrainOptions& options);

// The step's allocations and frees in the order PyTorch makes them: at each
// time what dies after the op before, then the op's own allocations; what
// outlives the step is never freed. Positions are step times. What an
// allocator policy runs (device_memory.h) and what step_trace() writes.
alloc::AllocationSequence step_sequence(const TrainingStep& step);

// The step as a gpumem trace: one alloc and one free event per allocation,
// in time order, with "<phase>: <op>" as context, on device 0. What is
// resident before the step is allocated first.
// Without `contexts` the events carry none: what a replay needs, at a
// fraction of the cost.
trace::Trace step_trace(const TrainingStep& step, bool contexts = true);

}  // namespace gpumem::train
